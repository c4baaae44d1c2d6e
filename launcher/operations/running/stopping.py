"""Stopping a cluster's processes on every node at once: what down, up and supervise share."""

from __future__ import annotations

from launcher.core.answers.run_answer import Stopped
from launcher.core.reports import down_lines
from launcher.core.serving.state import DownResult
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Reached
from launcher.operations.reporter import Reporter


def stop_reachable(cluster: Reached, grace: float) -> tuple[DownResult, dict[str, SparkLaunchError]]:
    """Stop every process of ours on every node that answers, at once; and the nodes that did not.

    Containers too for the docker runtime; where the spec cannot tell, each node's state does.
    """
    containers = cluster.reach.runtime == "docker"
    results = cluster.each(lambda agent: agent.stop(grace, containers))
    stopped = {n: r for n, r in results.items() if isinstance(r, Stopped)}
    return DownResult(stopped), {n: r for n, r in results.items() if isinstance(r, SparkLaunchError)}


def stop_all(cluster: Reached, grace: float) -> DownResult:
    """Stop every process of ours on every node at once; an unreachable node is an error."""
    result, unreachable = stop_reachable(cluster, grace)
    for error in unreachable.values():
        raise error
    return result


def down(cluster: Reached, grace: float, reporter: Reporter) -> DownResult:
    """Stop the cluster on every node that answers, and say what is left: processes that
    survived SIGKILL (`clean` is false) and the nodes that could not be reached."""
    stopped, unreachable = stop_reachable(cluster, grace)
    result = DownResult(stopped.per_node, {n: e.reason for n, e in unreachable.items()})
    for line in down_lines(result):
        reporter.info(line)
    return result
