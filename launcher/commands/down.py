"""`spark-launch down`: stop every rank of the cluster on every node at once; ours only."""

from __future__ import annotations

from launcher.commands.reporter import Reporter
from launcher.commands.stopping import stop_all
from launcher.core.reports import down_lines
from launcher.core.serving.state import DownResult
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Reached


def down(cluster: Reached, grace: float, reporter: Reporter) -> DownResult:
    """Stop the cluster everywhere and check that nothing of ours is left."""
    result = stop_all(cluster, grace)
    for line in down_lines(result):
        reporter.info(line)
    if not result.clean:
        raise SparkLaunchError("some processes survived SIGKILL", "look at them with ps on the node")
    return result
