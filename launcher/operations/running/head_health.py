"""What the commands that watch a serving cluster share: the head's health, one completion under
a deadline, the engine's counters, and the watchdog's verdict (up, status, verify, supervise).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from launcher.core.serving.watchdog import Completion, Counters, Verdict, counters_from, judge
from launcher.node.cluster import Reached
from launcher.node.executor import NodeError

DEADLINE = 30.0  # seconds a 1-token completion may take before the engine counts as wedged
PROMPT = "Hello"
LOST_AFTER_SECONDS = 6.0  # each node's watch sends a heartbeat a second


def head_health(cluster: Reached) -> tuple[int | None, str | None]:
    """The head's /health status and served model (None for what does not answer)."""
    health, model = None, None
    try:
        health, _ = cluster.http("GET", "/health", timeout=5)
        model = str(cluster.served_model(timeout=5)["id"])
    except NodeError:
        pass
    return health, model


def head_verdict(
    cluster: Reached,
    deadline: float,
    since: Counters | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Verdict, Counters | None]:
    """The watchdog on the head alone (for a caller that watches the ranks itself)."""
    health, model = head_health(cluster)
    return watchdog(cluster, [], health, model, deadline, since, clock)


def watchdog(
    cluster: Reached,
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


def read_counters(cluster: Reached, clock: Callable[[], float] = time.monotonic) -> Counters | None:
    """The engine's counters from the head's /metrics; None when they cannot be read."""
    try:
        code, body = cluster.http("GET", "/metrics", timeout=10)
        return counters_from(metric_totals(body.decode()), clock()) if code == 200 else None
    except (NodeError, ValueError):
        return None


def complete(
    cluster: Reached, model: str, deadline: float, clock: Callable[[], float] = time.monotonic
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


def metric_totals(text: str) -> dict[str, float]:
    """Counter totals by family name (summed over label sets) from Prometheus text."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == family.name + "_total" or (
                family.type != "counter" and sample.name == family.name
            ):
                totals[family.name] = totals.get(family.name, 0.0) + float(sample.value)
    return totals
