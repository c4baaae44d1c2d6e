"""`spark-launch down`: stop every rank of the cluster on every node at once; ours only."""

from __future__ import annotations

from launcher.commands.reporter import Reporter
from launcher.commands.stopping import stop_reachable
from launcher.core.reports import down_lines
from launcher.core.serving.state import DownResult
from launcher.node.cluster import Reached


def down(cluster: Reached, grace: float, reporter: Reporter) -> DownResult:
    """Stop the cluster on every node that answers, and say what is left: processes that
    survived SIGKILL (`clean` is false) and the nodes that could not be reached."""
    stopped, unreachable = stop_reachable(cluster, grace)
    result = DownResult(stopped.per_node, {n: e.reason for n, e in unreachable.items()})
    for line in down_lines(result):
        reporter.info(line)
    return result
