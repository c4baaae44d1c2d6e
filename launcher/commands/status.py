"""`spark-launch status`: every chosen deployment, each named, then the endpoint. One cluster's
status is `operations.running.cluster_status`."""

from __future__ import annotations

from typing import Any

from launcher.core.serving.state import ClusterStatus
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Reached
from launcher.operations.fleet import Reachable, each
from launcher.operations.running.cluster_status import status
from launcher.operations.running.endpoint import endpoint_status

__all__ = ["status_document", "status_fleet"]


def status_fleet(
    deployments: Reachable, deadline: float | None
) -> tuple[dict[str, ClusterStatus], dict[str, Any] | None]:
    """Every chosen deployment's status, by name, and the endpoint's (when there is one)."""
    clusters: dict[str, Reached] = dict(deployments.clusters)
    found = each(clusters, lambda _, c: status(c, deadline))
    out: dict[str, ClusterStatus] = {}
    for name, result in found.items():
        if isinstance(result, SparkLaunchError):
            raise result
        out[name] = result
    endpoint = None
    if deployments.endpoint is not None:
        try:
            endpoint = endpoint_status(deployments.endpoint)
        except SparkLaunchError:  # its node not reached: named with the others, once
            plan = deployments.endpoint.plan
            endpoint = {
                "node": plan.node.name,
                "url": plan.url,
                "running": None,
                "serving": False,
                "models": [],
            }
    return out, endpoint


def status_document(
    cluster: str, found: dict[str, ClusterStatus], endpoint: dict[str, Any] | None
) -> dict[str, Any]:
    """`status --json`: every deployment in a list (one deployment: a list of one), the endpoint."""
    document: dict[str, Any] = {
        "cluster": cluster,
        "deployments": [{"deployment": name, **result.as_dict()} for name, result in found.items()],
    }
    return document | ({"endpoint": endpoint} if endpoint is not None else {})
