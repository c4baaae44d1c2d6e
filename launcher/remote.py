"""The launcher's side of the node agent: each call is one SSH command, answered in JSON."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.executor import Executor, NodeError
from launcher.render import run_dir

AGENT_SOURCE = (Path(__file__).parent / "agent.py").read_text()


class Agent:
    """Calls the agent script on one node through an Executor."""

    def __init__(self, executor: Executor, cluster: str, node: str, python: str = "python3") -> None:
        self.executor = executor
        self.node = node
        self.dir = run_dir(cluster, node)
        self.python = python

    def call(self, op: str, *args: str, timeout: float = 60) -> dict[str, Any]:
        """Run one agent operation; its JSON answer, or a NodeError."""
        command = f"{self.python} - {shlex.join([op, self.dir, *args])}"
        result = self.executor.run(self.node, command, stdin=AGENT_SOURCE, timeout=timeout)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if not lines:
            detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise NodeError(
                self.node,
                f"the node agent failed ({op}): {' / '.join(detail) or 'no output'}",
                "the node needs python3 on its PATH",
            )
        answer: dict[str, Any] = json.loads(lines[-1])
        return answer

    def start(self, job: dict[str, Any]) -> dict[str, Any]:
        """Send the job (secrets inside, mode 0600 in a 0700 directory), then start it."""
        self.executor.run(self.node, f"umask 077; mkdir -p {shlex.quote(self.dir)}/logs", timeout=30)
        self.executor.put(self.node, json.dumps(job).encode(), f"{self.dir}/run.json", 0o600)
        return self.call("start")

    def status(self, offset: int | None = None) -> dict[str, Any]:
        """State, liveness and exit status; with `offset`, the log from there on."""
        return self.call("status", *([] if offset is None else [str(offset)]))

    def stop(self, grace: float) -> dict[str, Any]:
        """Stop every process of ours on the node (TERM, then KILL after `grace` s)."""
        return self.call("stop", str(grace), timeout=grace + 30)

    def stream(self, op: str, *args: str, on_line: Callable[[str], None]) -> None:
        """Run an agent operation whose output comes line by line (the source goes in a heredoc,
        since a streamed command's stdin is closed at once)."""
        command = f"{self.python} - {shlex.join([op, self.dir, *args])}"
        wrapped = f"{command} <<'SPARK_LAUNCH_AGENT'\n{AGENT_SOURCE}\nSPARK_LAUNCH_AGENT"
        self.executor.stream(self.node, wrapped, on_line)

    def logs(self, lines: int, follow: bool, on_line: Callable[[str], None]) -> None:
        """Hand the node's log to `on_line`, line by line; with `follow`, until interrupted."""
        self.stream("logs", str(lines), *(["follow"] if follow else []), on_line=on_line)

    def lock(self, holder: dict[str, Any]) -> dict[str, Any]:
        """Take the cluster lock (kept beside this node's run directory)."""
        return self.call("lock", json.dumps(holder))

    def unlock(self, token: str) -> dict[str, Any]:
        """Release the cluster lock held with `token` ('*' forces it)."""
        return self.call("unlock", token)
