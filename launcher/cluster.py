"""A planned cluster and its nodes' agents: the shared handle of every cluster operation."""

from __future__ import annotations

import os
import secrets as pysecrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from launcher.errors import SparkLaunchError
from launcher.executor import Executor, fan_out
from launcher.plan import Plan
from launcher.remote import Agent
from launcher.render import NodeCommand
from launcher.spec import Spec


class Reporter(Protocol):
    """Where operations tell the user what is happening (the CLI prints; tests collect)."""

    def info(self, text: str) -> None:
        """A line of progress."""

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Each node's current start-up stage."""


class Silent:
    """A Reporter that says nothing (for scripts and tests)."""

    def info(self, text: str) -> None:
        """Ignore."""

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Ignore."""


@dataclass
class Cluster:
    """The spec, its plan, and one agent per node over one executor."""

    spec: Spec
    plan: Plan
    executor: Executor
    api_key: str | None = None  # VLLM_API_KEY's value when the spec lists it as a secret

    def __post_init__(self) -> None:
        self.agents = {n.name: Agent(self.executor, self.spec.name, n.name) for n in self.plan.nodes}

    @property
    def names(self) -> list[str]:
        """Node names, rank order."""
        return [n.name for n in self.plan.nodes]

    @property
    def head(self) -> NodeCommand:
        """Rank 0."""
        return self.plan.nodes[0]

    @property
    def api_port(self) -> int:
        """The head's API port, as the plan pinned it."""
        return int(next(d.value for d in self.plan.derived if d.setting == "port"))

    @property
    def api_host(self) -> str:
        """Where the head's API listens, as seen from the head itself."""
        host = self.spec.serve.get("host")
        return "127.0.0.1" if host in (None, "", "0.0.0.0", "::") else str(host)

    def each(self, task: Callable[[Agent], dict[str, Any]]) -> dict[str, dict[str, Any] | SparkLaunchError]:
        """Run an agent call on every node at once."""
        return fan_out(self.names, lambda name: task(self.agents[name]))

    def http(
        self, method: str, path: str, body: bytes | None = None, timeout: float = 10.0
    ) -> tuple[int, bytes]:
        """An HTTP request to the head's API, through its SSH connection."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        response = self.executor.http(
            self.head.name, self.api_port, method, path, body, timeout, self.api_host, headers
        )
        return response.status, response.body


def new_run_id() -> str:
    """A sortable, unique id for one start of the cluster (names the log files)."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + pysecrets.token_hex(2)


def lock_holder(command: str) -> dict[str, Any]:
    """Who takes the cluster lock: enough to tell a stale lock from a live one."""
    return {
        "token": pysecrets.token_hex(8),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "user": os.environ.get("USER", "?"),
        "command": command,
        "since": time.time(),
    }


def holder_is_stale(holder: dict[str, Any]) -> bool:
    """True when the holder was a process on this machine that no longer exists."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
