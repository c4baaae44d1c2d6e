"""The collective preflight, run by `check` (and so `up`): the fabric proven the way vLLM uses it.

A port found free on the head becomes the preflight's store (a port of its own), then every
node's preflight starts at once; the workers retry the store until the head serves it. Each
node runs under its own vLLM Python with
exactly the env the plan gives vLLM there (`core.remote.preflight_call`), proves every
connection vLLM opens from it (`core.checks.connections`), then the all-reduce. Each keeps a
deadline of its own, so a blocked connection or a hung collective is reported, named, in
seconds; the launcher stops waiting for the head once every worker has answered.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from launcher.core import remote
from launcher.core.answers.facts_answer import Facts
from launcher.core.answers.preflight_answer import (
    PreflightAnswer,
    Reached,
    Serving,
    Stage,
    free_port,
    preflight_line,
)
from launcher.core.checks import Row
from launcher.core.checks.collective_rows import preflight_rows, skipped_row
from launcher.core.checks.connections import DEADLINE_SECONDS, preflight_requests, vllm_connections
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster

HEAD_GRACE = 5.0  # after the workers' answers, for the head's own
LAST_LINES = 3  # of a preflight's output that never answered, shown


@dataclass
class _Run:
    """One node's preflight as it streams: its stage, what it reached, its answer."""

    done: threading.Event = field(default_factory=threading.Event)
    stage: str = "starting"
    answer: PreflightAnswer | None = None
    reached: dict[str, str] = field(default_factory=dict)
    other: list[str] = field(default_factory=list)
    error: str | None = None

    def on_event(self, event: Stage | Reached | Serving | PreflightAnswer) -> None:
        """Keep a progress event, or the answer."""
        if isinstance(event, Reached):
            self.reached = event.reached
        elif isinstance(event, Stage):
            self.stage = event.stage + (f" ({event.detail})" if event.detail else "")
        elif isinstance(event, PreflightAnswer):
            self.answer = event

    def on_other(self, line: str) -> None:
        """A line that is no JSON (torch's warnings, a traceback): quoted if no answer comes."""
        self.other = [*self.other, line][-LAST_LINES:]

    def result(self) -> PreflightAnswer:
        """The answer, or how the preflight ended without one (or is still waiting)."""
        if self.answer is not None:
            return self.answer
        if not self.done.is_set():
            why = "still waiting when every other node had answered"
            return PreflightAnswer(False, self.stage, why, reached=self.reached)
        said = " / ".join(x.strip() for x in self.other if x.strip())
        why = self.error or (f"ended without an answer: {said}" if said else "ended without an answer")
        return PreflightAnswer(ok=False, stage=self.stage, error=why, reached=self.reached)


def preflight_rows_of(cluster: Cluster, facts: Mapping[str, Facts], runnable: bool) -> list[Row]:
    """The preflight's rows: run when every node holds the vLLM it runs under and none runs ours."""
    plan = cluster.plan
    if len(plan.nodes) < 2:
        return []
    if any(f.get("ours_running") for f in facts.values()):
        return [skipped_row(plan, "this cluster is running (its ports and GPUs are in use)")]
    if not runnable:
        return [skipped_row(plan, "a node lacks the vLLM install it runs under (see the vllm rows)")]
    gpus = all((f.get("memory") or {}).get("gpus") for f in facts.values())
    backends = ("gloo", "nccl") if gpus else ("gloo",)
    answers = run_preflight(cluster, backends[-1])
    return preflight_rows(plan, vllm_connections(plan, nccl=gpus), backends, answers)


def run_preflight(cluster: Cluster, backend: str) -> dict[str, PreflightAnswer]:
    """Every node's preflight at once, on a store port found free on the head just before."""
    plan = cluster.plan
    head = plan.nodes[0]
    agent = cluster.agents[head.name]
    try:
        port = agent.ask(remote.preflight_port_call(agent.dir, head.address), free_port)
    except SparkLaunchError as exc:
        why = f"no free port on the head for the preflight's store: {exc.message}"
        return {n.name: PreflightAnswer(False, "starting", why) for n in plan.nodes}
    requests = preflight_requests(plan, backend, port)
    runs = {n.name: _Run() for n in plan.nodes}
    for node in plan.nodes:
        _start(cluster, node.name, requests[node.name], runs[node.name])
    for node in plan.nodes[1:]:
        runs[node.name].done.wait(DEADLINE_SECONDS + 15)
    # The head answers last (it serves the store until every node is done with it).
    runs[head.name].done.wait(HEAD_GRACE if plan.nodes[1:] else DEADLINE_SECONDS + 15)
    return {n: r.result() for n, r in runs.items()}


def _start(cluster: Cluster, name: str, request: dict[str, Any], run: _Run) -> None:
    """Run one node's preflight in a thread, its lines read as they come."""
    node = next(n for n in cluster.plan.nodes if n.name == name)
    agent = cluster.agents[name]
    call = remote.preflight_call(cluster.spec, node, agent.dir, request)

    def go() -> None:
        try:
            agent.events(call, preflight_line, run.on_event, run.on_other)
        except SparkLaunchError as exc:
            run.error = exc.message
        finally:
            run.done.set()

    threading.Thread(target=go, name=f"preflight-{name}", daemon=True).start()
