"""Stopping a cluster's processes on every node at once: what down, up and supervise share."""

from __future__ import annotations

from launcher.core.answers.run import Stopped
from launcher.core.serving.state import DownResult
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Reached


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
