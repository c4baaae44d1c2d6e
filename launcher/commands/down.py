"""`spark-launch down`: stop every rank of the chosen deployments on every node at once (ours
only), and the endpoint when every deployment is stopped."""

from __future__ import annotations

from launcher.core.serving.state import DownResult
from launcher.errors import SparkLaunchError
from launcher.operations.fleet import Deployments, Prefixed, Reachable
from launcher.operations.reporter import Reporter
from launcher.operations.running.endpoint import route_running, stop_endpoint
from launcher.operations.running.stopping import down

__all__ = ["down_fleet"]


def down_fleet(
    deployments: Reachable, grace: float, reporter: Reporter, secret_values: dict[str, str] | None = None
) -> dict[str, DownResult]:
    """Stop the chosen deployments (every one: the endpoint too), each on its own nodes. Some of
    them only: the endpoint then routes to those that still run (`secret_values`: what its
    router's environment needs, to start it again), and stops when none does."""
    results: dict[str, DownResult] = {}
    for name, cluster in deployments.clusters.items():
        results[name] = down(cluster, grace, Prefixed(reporter, name) if deployments.multi else reporter)
    if isinstance(deployments, Deployments) and deployments.endpoint is not None and not deployments.whole:
        _route_the_rest(deployments, reporter, secret_values or {})
        return results
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


def _route_the_rest(deployments: Deployments, reporter: Reporter, secret_values: dict[str, str]) -> None:
    """After some deployments stopped: the endpoint routes to those that still run, and only them."""
    assert deployments.endpoint is not None
    missing = [n for n in deployments.endpoint.plan.secrets if n not in secret_values]
    if missing:  # its router cannot start again without them: say so, change nothing
        reporter.info(
            f"endpoint: still routes to what was stopped: {', '.join(missing)} not set here to start "
            "its router again (set it, then `spark-launch up SPEC` routes anew)"
        )
        return
    running = deployments.running_others()
    try:
        url = route_running(deployments.endpoint, running, secret_values, reporter)
    except SparkLaunchError as exc:
        reporter.info(f"endpoint: its routes not changed: {exc.message}")
        return
    if url is not None:
        reporter.info(f"endpoint {url}: routes to {', '.join(running)}")
