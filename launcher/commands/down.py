"""`spark-launch down`: stop every rank of the cluster on every node at once; ours only."""

from __future__ import annotations

from launcher.core.reports import down_lines
from launcher.core.state import DownResult
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster, Reporter


def stop_reachable(cluster: Cluster, grace: float) -> tuple[DownResult, dict[str, SparkLaunchError]]:
    """Stop every process of ours on every node that answers, at once; and the nodes that did not."""
    containers = cluster.spec.vllm.runtime == "docker"
    results = cluster.each(lambda agent: agent.stop(grace, containers))
    stopped = {n: r for n, r in results.items() if isinstance(r, dict)}
    return DownResult(stopped), {n: r for n, r in results.items() if isinstance(r, SparkLaunchError)}


def stop_all(cluster: Cluster, grace: float) -> DownResult:
    """Stop every process of ours on every node at once; an unreachable node is an error."""
    result, unreachable = stop_reachable(cluster, grace)
    for error in unreachable.values():
        raise error
    return result


def down(cluster: Cluster, grace: float, reporter: Reporter) -> DownResult:
    """Stop the cluster everywhere and check that nothing of ours is left."""
    result = stop_all(cluster, grace)
    for line in down_lines(result):
        reporter.info(line)
    if not result.clean:
        raise SparkLaunchError("some processes survived SIGKILL", "look at them with ps on the node")
    return result
