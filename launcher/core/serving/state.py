"""What the commands find and prove, as values: a cluster's status, a verification. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from launcher.core.answers.run_answer import Stopped
from launcher.core.serving.watchdog import Counters, Verdict


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node, as its status script reports it."""

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


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """Every node, plus the head's health and served model."""

    cluster: str
    plan_digest: str | None  # None: the spec does not plan, so no node can be held to it
    nodes: tuple[NodeStatus, ...]
    health: int | None
    model: str | None
    serving: Verdict | None = None  # the watchdog's verdict, when it was asked
    counters: Counters | None = None  # the engine's counters as last read

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
        if self.plan_digest is None:
            return "running"
        return "running" if all(n.digest == self.plan_digest for n in running) else "drift"

    def matches(self, node: NodeStatus) -> bool | None:
        """Whether the node runs the spec's plan; None when the spec does not plan."""
        return None if self.plan_digest is None else node.digest == self.plan_digest

    def as_dict(self) -> dict[str, Any]:
        """For `status --json`."""
        return {
            "cluster": self.cluster,
            "state": self.state,
            "plan": self.plan_digest,
            "health": self.health,
            "model": self.model,
            "serving": self.serving.as_dict() if self.serving else None,
            "nodes": [asdict(n) | {"plan_matches": self.matches(n)} for n in self.nodes],
        }


def api_endpoint(argv: list[str]) -> tuple[str, int] | None:
    """Where the head's API listens, as seen on the head, from its running command line
    (`--port=N`, `--host=H`; vLLM's defaults otherwise): None when nothing runs."""
    if not argv:
        return None
    found: dict[str, str] = {}
    for i, word in enumerate(argv):
        for flag in ("--port", "--host"):
            if word.startswith(flag + "="):
                found[flag] = word.split("=", 1)[1]
            elif word == flag and i + 1 < len(argv):
                found[flag] = argv[i + 1]
    host = found.get("--host", "")
    port = found.get("--port", "8000")
    if not port.isdigit():
        return None
    return ("127.0.0.1" if host in ("", "0.0.0.0", "::") else host), int(port)


@dataclass
class Check:
    """One verification step and its outcome."""

    name: str
    ok: bool
    detail: str


@dataclass
class Verification:
    """Every check, and what the running server says of its cache."""

    checks: list[Check] = field(default_factory=list)
    cache_config: dict[str, str] = field(default_factory=dict)
    hits: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        """For `verify --json`."""
        return {
            "ok": self.ok,
            "checks": [asdict(c) for c in self.checks],
            "cache_config": self.cache_config,
            "prefix_cache_hits_after_each_send": self.hits,
        }


@dataclass(frozen=True, slots=True)
class DownResult:
    """What `down` found and stopped on each node."""

    per_node: dict[str, Stopped]
    unreachable: dict[str, str] = field(default_factory=dict)  # node -> why it could not be reached

    @property
    def clean(self) -> bool:
        """True when nothing of ours is left on any node."""
        return all(r.remaining == 0 for r in self.per_node.values())
