"""Talking to one node: execute the Calls of `core.remote` there and read their JSON answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from launcher.core import remote
from launcher.core.remote import Call
from launcher.core.render import run_dir
from launcher.node.executor import Executor, NodeError, Result, Stream
from launcher.node.scripts import bundle


def stdin_of(call: Call) -> str | None:
    """What the call's stdin gets: its script's source (after its data, if any), or its data."""
    return (call.data or "") + bundle(call.script) if call.script else call.data


class Agent:
    """One node of one cluster, reached through an Executor."""

    def __init__(self, executor: Executor, cluster: str, node: str) -> None:
        self.executor = executor
        self.node = node
        self.dir = run_dir(cluster, node)

    def run(self, call: Call) -> Result:
        """Execute a call; its Result, whatever the exit status."""
        return self.executor.run(self.node, call.command, stdin=stdin_of(call), timeout=call.timeout)

    def ask(self, call: Call) -> dict[str, Any]:
        """Execute a script call; its JSON answer (the last JSON line), or a NodeError."""
        result = self.run(call)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if not lines:
            detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise NodeError(
                self.node,
                f"the node script {call.script} failed: {' / '.join(detail) or 'no output'}",
                "the node needs python3 (3.8 or newer) on its PATH",
            )
        answer: dict[str, Any] = json.loads(lines[-1])
        return answer

    def stream(self, call: Call, on_line: Callable[[str], None]) -> Result:
        """Execute a call whose output comes line by line."""
        return self.executor.stream(self.node, call.command, on_line, stdin=stdin_of(call))

    def open(self, call: Call) -> Stream:
        """Start a call whose output is read as it comes; its stdin is sent and closed first."""
        stream = self.executor.open(self.node, call.command)
        data = stdin_of(call)
        if data is not None:
            stream.send(data.encode())
        stream.send_eof()
        return stream

    def start(self, job: dict[str, Any]) -> dict[str, Any]:
        """Hand the job over and start it; the start script's answer."""
        handover, start = remote.start_calls(self.dir, job)
        self.run(handover).checked(self.node, "writing the job to the run directory")
        return self.ask(start)

    def status(self, offset: int | None = None) -> dict[str, Any]:
        """State, liveness and exit status; with `offset`, the log from there on."""
        return self.ask(remote.status_call(self.dir, offset))

    def stop(self, grace: float, containers: bool = False) -> dict[str, Any]:
        """Stop every process (with `containers`: every container) of ours on the node."""
        return self.ask(remote.stop_call(self.dir, grace, containers))

    def logs(self, lines: int, follow: bool, on_line: Callable[[str], None]) -> None:
        """Hand the node's log to `on_line`, line by line; with `follow`, until interrupted."""
        self.stream(remote.logs_call(self.dir, lines, follow), on_line)

    def lock(self, holder: dict[str, Any], stale: str | None = None) -> dict[str, Any]:
        """Take the cluster lock (kept beside this node's run directory); with `stale`, break
        the lock of the holder with that token in the same step, if it still has it."""
        return self.ask(remote.lock_call(self.dir, holder, stale))

    def unlock(self, token: str) -> dict[str, Any]:
        """Release the cluster lock held with `token` ('*' forces it)."""
        return self.ask(remote.unlock_call(self.dir, token))

    def image(self, image: str) -> dict[str, Any]:
        """The image as the node's engine holds it, and the engine's free space."""
        return self.ask(remote.image_call(self.dir, image))

    def facts(
        self, request: dict[str, Any], on_event: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """What `check` compares, gathered on the node; its events (the listener's) to `on_event`."""
        call = remote.facts_call(self.dir, request)
        if on_event is None:
            return self.ask(call)
        answer: dict[str, Any] = {}

        def on_line(line: str) -> None:
            if line.startswith("{"):
                data = json.loads(line)
                if "event" in data:
                    on_event(data)
                else:
                    answer.clear()
                    answer.update(data)

        result = self.stream(call, on_line)
        if not answer:
            detail = " / ".join(result.stderr.strip().splitlines()[-3:])
            raise NodeError(
                self.node,
                f"the node script facts failed (exit {result.exited}): {detail or 'no output'}",
                "the node needs python3 (3.8 or newer) on its PATH",
            )
        return answer

    def manifest(
        self,
        path: str,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        adopt: dict[str, list[Any]] | None = None,
    ) -> dict[str, Any]:
        """A model directory's manifest; hashing progress goes to `on_event` as it comes.

        `adopt`: files a copy has just proven, recorded as hashed (`remote.manifest_call`)."""
        answer: dict[str, Any] = {}

        def on_line(line: str) -> None:
            if line.startswith("{"):
                data = json.loads(line)
                if "event" in data:
                    if on_event is not None:
                        on_event(data)
                else:
                    answer.update(data)

        result = self.stream(remote.manifest_call(self.dir, path, adopt), on_line)
        if not answer:
            raise NodeError(
                self.node,
                f"the node script manifest failed on {path} (exit {result.exited})",
                "the node needs python3 (3.8 or newer) on its PATH",
            )
        if not answer.get("ok"):
            raise NodeError(self.node, f"cannot read the model directory {path}: {answer.get('error')}")
        return answer
