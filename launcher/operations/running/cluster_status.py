"""One cluster's status (`status`, `supervise`, `diagnose`): what runs on every node, which plan,
and whether the head really serves.

Besides /health (which stays 200 on a wedged tensor-parallel engine), the watchdog sends a
one-token completion with a deadline and reads the engine's own counters on /metrics just
before and after it: `core.watchdog` weighs them into serving, wedged or down.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from launcher.core.answers.run_answer import NodeState
from launcher.core.serving.state import ClusterStatus, NodeStatus, api_endpoint
from launcher.core.serving.watchdog import Counters
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Reached
from launcher.operations.running.head_health import DEADLINE, head_health, watchdog

__all__ = ["status"]


def status(
    cluster: Reached,
    deadline: float | None = DEADLINE,
    since: Counters | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ClusterStatus:
    """Ask every node at once, then the head: /health, /v1/models and (with a deadline) the watchdog.

    `since`: the counters of an earlier call, to measure tokens per second over the interval.
    Without a plan (the spec does not plan), the head's API is where its running command says.
    """
    answers = cluster.each(lambda agent: agent.status())
    nodes = tuple(_node_status(name, rank, answers[name]) for rank, name in enumerate(cluster.names))
    head = answers[cluster.head_name]
    if cluster.endpoint is None and isinstance(head, NodeState) and head.state is not None:
        cluster.endpoint = api_endpoint(list(head.state.argv))
    health, model = head_health(cluster) if nodes[0].running else (None, None)
    digest = cluster.plan.digest if cluster.plan else None
    result = ClusterStatus(cluster.name, digest, nodes, health, model)
    if deadline is None or not nodes[0].reachable:  # no head to ask: nothing to weigh
        return result
    # A node not reached is not known to be down: the head's answers say how it serves.
    not_running = [n.name for n in nodes if n.reachable and not n.running]
    verdict, counters = watchdog(cluster, not_running, health, model, deadline, since, clock)
    return ClusterStatus(result.cluster, result.plan_digest, nodes, health, model, verdict, counters)


def _node_status(name: str, rank: int, answer: NodeState | SparkLaunchError) -> NodeStatus:
    if isinstance(answer, SparkLaunchError):
        return NodeStatus(name, rank, False, False, None, None, None, None, 0, None, answer.reason)
    state = answer.state
    return NodeStatus(
        name,
        rank,
        True,
        answer.alive,
        state.pid if state else None,
        state.started_at if state else None,
        state.run_id if state else None,
        state.digest if state else None,
        answer.processes,
        answer.exit_code,
    )
