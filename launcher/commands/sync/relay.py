"""The copy through this machine (`sync models --relay`), for nodes that cannot SSH to each other.

The source runs rsync with its own transfer script as the remote shell; that script passes
rsync's stream to its stdin and stdout, that is to this machine, which starts the
`rsync --server` rsync asked for on the target over the target's SSH connection and pumps
the bytes both ways. The source's progress then comes on stderr.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from typing import Any

from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError, Stream


def relayed(
    cluster: Cluster, source: str, node: str, command: str, on_event: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Run the source's rsync with this machine as its remote shell to the target; its final answer."""
    sender = cluster.executor.open(source, command)
    answer: dict[str, Any] = {}
    receiver: Stream | None = None
    threads: list[threading.Thread] = []
    said: list[str] = []  # what the target's rsync said on stderr
    try:
        for line in sender.stderr_lines():
            data = json.loads(line) if line.startswith("{") else {}
            if data.get("event") == "progress":
                on_event(data)
            elif data.get("event") == "relay":
                receiver = cluster.executor.open(node, _server_command(node, data["command"]))
                threads = [
                    _pump(sender.recv, receiver.send, receiver.send_eof),
                    _pump(receiver.recv, sender.send, sender.send_eof),
                    _thread(functools.partial(_collect, receiver, said)),
                ]
            elif data and "event" not in data:
                answer = data
        for thread in threads:
            thread.join(30)
    finally:
        if receiver is not None:
            receiver.close()
        sender.close()
    if said and not answer.get("ok"):
        answer["error"] = f"{answer.get('error', '')} / {node}: {' / '.join(said[-2:])}"
    return answer


def _server_command(node: str, command: list[str]) -> str:
    """The rsync server the source's rsync asks for on the target: that, and nothing else."""
    if command[:2] != ["rsync", "--server"] or "--sender" in command:
        raise NodeError(node, f"the relay was asked to run something else than an rsync receiver: {command}")
    return " ".join(command)  # as ssh passes it: rsync has already quoted it for the remote shell


def _pump(
    read: Callable[[int], bytes], write: Callable[[bytes], None], end: Callable[[], None]
) -> threading.Thread:
    """Copy one direction of the relayed stream until its end, then close the other side's input."""

    def run() -> None:
        try:
            for chunk in iter(lambda: read(1 << 16), b""):
                write(chunk)
            end()
        except (OSError, EOFError, ValueError):
            pass  # the other side went away: its own status says why

    return _thread(run)


def _collect(stream: Stream, lines: list[str]) -> None:
    lines.extend(stream.stderr_lines())


def _thread(run: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
