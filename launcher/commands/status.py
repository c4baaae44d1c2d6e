"""`spark-launch status` of several deployments: each named, then the endpoint. One cluster's
status is `operations.running.cluster_status`."""

from __future__ import annotations

from typing import Any

from launcher.errors import SparkLaunchError
from launcher.node.cluster import Reached
from launcher.operations.fleet import Reachable, each
from launcher.operations.running.cluster_status import status
from launcher.operations.running.endpoint import endpoint_status

__all__ = ["status_fleet"]


def status_fleet(deployments: Reachable, deadline: float | None) -> dict[str, Any]:
    """`status --json` of several deployments: each named, and the endpoint."""
    clusters: dict[str, Reached] = dict(deployments.clusters)
    found = each(clusters, lambda _, c: status(c, deadline))
    out: dict[str, Any] = {"cluster": deployments.name, "deployments": []}
    for name, result in found.items():
        if isinstance(result, SparkLaunchError):
            raise result
        out["deployments"].append({"deployment": name, **result.as_dict()})
    if deployments.endpoint is not None:
        out["endpoint"] = endpoint_status(deployments.endpoint)
    return out
