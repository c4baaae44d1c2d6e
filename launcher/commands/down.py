"""`spark-launch down`: stop every rank of the chosen deployments on every node at once (ours
only), and the endpoint when every deployment is stopped."""

from __future__ import annotations

from launcher.core.serving.state import DownResult
from launcher.errors import SparkLaunchError
from launcher.operations.fleet import Prefixed, Reachable
from launcher.operations.reporter import Reporter
from launcher.operations.running.endpoint import stop_endpoint
from launcher.operations.running.stopping import down

__all__ = ["down_fleet"]


def down_fleet(deployments: Reachable, grace: float, reporter: Reporter) -> dict[str, DownResult]:
    """Stop the chosen deployments (every one: the endpoint too), each on its own nodes."""
    results: dict[str, DownResult] = {}
    for name, cluster in deployments.clusters.items():
        results[name] = down(cluster, grace, Prefixed(reporter, name) if deployments.multi else reporter)
    if deployments.endpoint is not None and deployments.whole:
        try:
            answer = stop_endpoint(deployments.endpoint, grace)
        except SparkLaunchError as exc:
            reporter.info(f"endpoint: not stopped: {exc.message}")
            return results
        reporter.info(
            f"endpoint on {deployments.endpoint.plan.node.name}: stopped {answer.found} process(es)"
        )
        if answer.remaining:
            raise SparkLaunchError(
                "the endpoint's processes survived SIGKILL", "look at them with ps on the node"
            )
    return results
