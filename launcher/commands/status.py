"""`spark-launch status`: what runs on every node, which plan, and the head's health."""

from __future__ import annotations

from typing import Any

from launcher.core.state import ClusterStatus, NodeStatus
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError


def status(cluster: Cluster) -> ClusterStatus:
    """Ask every node at once, then the head's /health and /v1/models."""
    answers = cluster.each(lambda agent: agent.status())
    nodes = tuple(_node_status(n.name, n.rank, answers[n.name]) for n in cluster.plan.nodes)
    health, model = None, None
    if nodes[0].running:
        try:
            health, _ = cluster.http("GET", "/health", timeout=5)
            model = str(cluster.served_model(timeout=5)["id"])
        except NodeError:
            pass
    return ClusterStatus(cluster.spec.name, cluster.plan.digest, nodes, health, model)


def _node_status(name: str, rank: int, answer: dict[str, Any] | SparkLaunchError) -> NodeStatus:
    if isinstance(answer, SparkLaunchError):
        return NodeStatus(name, rank, False, False, None, None, None, None, 0, None, answer.message)
    state = answer.get("state") or {}
    return NodeStatus(
        name,
        rank,
        True,
        bool(answer["alive"]),
        state.get("pid"),
        state.get("started_at"),
        state.get("run_id"),
        state.get("digest"),
        int(answer.get("processes", 0)),
        answer.get("exit_code"),
    )
