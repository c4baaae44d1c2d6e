"""Looking at a cluster without changing it: status of every node, and their logs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launcher.cluster import Cluster
from launcher.errors import SparkLaunchError
from launcher.executor import NodeError


@dataclass(frozen=True)
class NodeStatus:
    """One node, as its agent reports it."""

    name: str
    rank: int
    reachable: bool
    running: bool
    pid: int | None
    since: float | None
    run_id: str | None
    digest: str | None
    processes: int
    exit_code: int | None
    error: str | None = None


@dataclass(frozen=True)
class ClusterStatus:
    """Every node, plus the head's health and served model."""

    cluster: str
    plan_digest: str
    nodes: tuple[NodeStatus, ...]
    health: int | None
    model: str | None

    @property
    def state(self) -> str:
        """running, stopped, partial (some ranks only), drift (another plan) or unknown."""
        if any(not n.reachable for n in self.nodes):
            return "unknown"
        running = [n for n in self.nodes if n.running]
        if not running:
            return "stopped"
        if len(running) < len(self.nodes):
            return "partial"
        return "running" if all(n.digest == self.plan_digest for n in running) else "drift"

    def as_dict(self) -> dict[str, Any]:
        """For `status --json`."""
        return {
            "cluster": self.cluster,
            "state": self.state,
            "plan": self.plan_digest,
            "health": self.health,
            "model": self.model,
            "nodes": [n.__dict__ | {"plan_matches": n.digest == self.plan_digest} for n in self.nodes],
        }


def status(cluster: Cluster) -> ClusterStatus:
    """Ask every node at once, then the head's /health and /v1/models."""
    answers = cluster.each(lambda agent: agent.status())
    nodes = tuple(_node_status(n.name, n.rank, answers[n.name]) for n in cluster.plan.nodes)
    health, model = None, None
    if nodes[0].running:
        try:
            health, _ = cluster.http("GET", "/health", timeout=5)
            code, body = cluster.http("GET", "/v1/models", timeout=5)
            model = str(json.loads(body)["data"][0]["id"]) if code == 200 else None
        except (NodeError, ValueError, KeyError, IndexError):
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


def status_text(st: ClusterStatus) -> str:
    """`status` for people."""
    lines = [f"cluster {st.cluster}: {st.state} (spec's plan {st.plan_digest})"]
    for n in st.nodes:
        if not n.reachable:
            lines.append(f"  {n.name:<12} rank {n.rank}  UNREACHABLE: {n.error}")
            continue
        if n.running:
            age = time.time() - (n.since or time.time())
            what = (
                f"running  pid {n.pid}, {n.processes} process(es), up {age:.0f} s, run {n.run_id}, "
                f"plan {n.digest}" + ("" if n.digest == st.plan_digest else "  <- NOT the spec's plan")
            )
        elif n.run_id:
            what = f"stopped  last run {n.run_id}" + (
                f" exited {n.exit_code}" if n.exit_code is not None else ""
            )
        else:
            what = "stopped  never started here"
        lines.append(f"  {n.name:<12} rank {n.rank}  {what}")
    if st.nodes and st.nodes[0].running:
        lines.append(f"  head /health: {st.health or 'no answer'}; model: {st.model or '?'}")
    return "\n".join(lines)


def logs(cluster: Cluster, names: list[str], lines: int, follow: bool, emit: Callable[[str], None]) -> None:
    """Each node's log prefixed by its name; following interleaves them as they come."""
    width = max(len(n) for n in names)
    lock = threading.Lock()

    def printer(name: str) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            with lock:
                emit(f"{name:>{width}} | {line}")

        return on_line

    if not follow:
        for name in names:
            cluster.agents[name].logs(lines, False, printer(name))
        return
    threads = [
        threading.Thread(target=cluster.agents[n].logs, args=(lines, True, printer(n)), daemon=True)
        for n in names
    ]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(0.2)
