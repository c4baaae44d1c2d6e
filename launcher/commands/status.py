"""`spark-launch status`: what runs on every node, which plan, and whether the head really serves.

Besides /health (which stays 200 on a wedged tensor-parallel engine), the watchdog sends a
one-token completion with a deadline and reads the engine's own counters on /metrics just
before and after it: `core.watchdog` weighs them into serving, wedged or down.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from launcher.commands.verify import metric_totals
from launcher.core.state import ClusterStatus, NodeStatus
from launcher.core.watchdog import Completion, Counters, Verdict, counters_from, judge
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError

DEADLINE = 30.0  # seconds a 1-token completion may take before the engine counts as wedged
PROMPT = "Hello"


def status(
    cluster: Cluster,
    deadline: float | None = DEADLINE,
    since: Counters | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ClusterStatus:
    """Ask every node at once, then the head: /health, /v1/models and (with a deadline) the watchdog.

    `since`: the counters of an earlier call, to measure tokens per second over the interval.
    """
    answers = cluster.each(lambda agent: agent.status())
    nodes = tuple(_node_status(n.name, n.rank, answers[n.name]) for n in cluster.plan.nodes)
    health, model = head_health(cluster) if nodes[0].running else (None, None)
    result = ClusterStatus(cluster.spec.name, cluster.plan.digest, nodes, health, model)
    if deadline is None:
        return result
    not_running = [n.name if n.reachable else f"{n.name} (unreachable)" for n in nodes if not n.running]
    verdict, counters = watchdog(cluster, not_running, health, model, deadline, since, clock)
    return ClusterStatus(result.cluster, result.plan_digest, nodes, health, model, verdict, counters)


def head_health(cluster: Cluster) -> tuple[int | None, str | None]:
    """The head's /health status and served model (None for what does not answer)."""
    health, model = None, None
    try:
        health, _ = cluster.http("GET", "/health", timeout=5)
        model = str(cluster.served_model(timeout=5)["id"])
    except NodeError:
        pass
    return health, model


def probe(
    cluster: Cluster,
    deadline: float,
    since: Counters | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Verdict, Counters | None]:
    """The watchdog on the head alone (for a caller that watches the ranks itself)."""
    health, model = head_health(cluster)
    return watchdog(cluster, [], health, model, deadline, since, clock)


def watchdog(
    cluster: Cluster,
    not_running: list[str],
    health: int | None,
    model: str | None,
    deadline: float,
    since: Counters | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Verdict, Counters | None]:
    """The verdict, and the counters read after the completion (for the next call's `since`)."""
    if not_running or health != 200:
        return judge(not_running, health, None, None, None, deadline), None
    before = read_counters(cluster, clock)
    completion = complete(cluster, model, deadline, clock) if model else None
    after = read_counters(cluster, clock)
    return judge(not_running, health, completion, before, after, deadline, since), after


def read_counters(cluster: Cluster, clock: Callable[[], float] = time.monotonic) -> Counters | None:
    """The engine's counters from the head's /metrics; None when they cannot be read."""
    try:
        code, body = cluster.http("GET", "/metrics", timeout=10)
        return counters_from(metric_totals(body.decode()), clock()) if code == 200 else None
    except (NodeError, ValueError):
        return None


def complete(
    cluster: Cluster, model: str, deadline: float, clock: Callable[[], float] = time.monotonic
) -> Completion:
    """A one-token completion that must finish within `deadline` seconds."""
    body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 1}).encode()
    began = clock()
    try:
        code, answer = cluster.http("POST", "/v1/completions", body, timeout=deadline)
    except NodeError as exc:
        took = clock() - began
        late = took >= deadline * 0.95 or "timed out" in exc.message
        return Completion(False, took, exc.message, timed_out=late)
    took = clock() - began
    if code != 200:
        return Completion(False, took, f"HTTP {code}: {answer[:200].decode(errors='replace')}")
    return Completion(True, took)


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
