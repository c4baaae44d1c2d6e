"""Stopping a cluster's processes on every node at once: what down, up and supervise share."""

from __future__ import annotations

from launcher.core.answers.run import Stopped
from launcher.core.serving.state import DownResult
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster


def stop_reachable(cluster: Cluster, grace: float) -> tuple[DownResult, dict[str, SparkLaunchError]]:
    """Stop every process of ours on every node that answers, at once; and the nodes that did not."""
    containers = cluster.spec.vllm.runtime == "docker"
    results = cluster.each(lambda agent: agent.stop(grace, containers))
    stopped = {n: r for n, r in results.items() if isinstance(r, Stopped)}
    return DownResult(stopped), {n: r for n, r in results.items() if isinstance(r, SparkLaunchError)}


def stop_all(cluster: Cluster, grace: float) -> DownResult:
    """Stop every process of ours on every node at once; an unreachable node is an error."""
    result, unreachable = stop_reachable(cluster, grace)
    for error in unreachable.values():
        raise error
    return result
