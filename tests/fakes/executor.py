"""A FAKE executor for the fast tier: it answers each call from a script of handlers.

Like invoke's MockContext: a test says what each node answers to each node script (key
NAME; its handler gets the words `python3 - NAME DIR ARGS`, whatever stub ran it) or to a
plain shell line (key "shell"), and reads back every call made and what its stdin got. Every
node keeps the unit already: nothing is ever asked to send it. For the branches a real bed
reaches only by accident (a partial start failure, a node lost while waiting, a busy lock),
and for counting what a command sends each node.
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from launcher.node.executor import HttpResponse, NodeError, Result, StopStream

# What a handler may answer: a JSON line (dict), several (a list, or an iterator streamed as it
# yields), a whole Result, or an error to raise.
Answer = dict[str, Any] | list[dict[str, Any]] | Iterator[dict[str, Any]] | Result | Exception
Handler = Callable[[list[str]], Answer]


@dataclass
class ScriptedExecutor:
    """Executor answering from `handlers[(node, key)]` (node "*" matches any node)."""

    handlers: dict[tuple[str, str], Handler]
    http_status: int = 200
    calls: list[tuple[str, str, list[str]]] = field(default_factory=list)
    stdins: list[str | None] = field(default_factory=list)  # what each call's stdin got, in step with calls
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keys(self, node: str) -> list[str]:
        """The scripts called on `node`, in order."""
        return [key for n, key, _ in self.calls if n == node]

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        """Answer from the handler for this node and script."""
        return self._result(command, self._answer(node, command, stdin))

    def _answer(self, node: str, command: str, stdin: str | None) -> Answer:
        words = shlex.split(command)
        if words[:3] == ["python3", "-S", "-c"]:  # python3 -S -c STUB UNIT NAME...: as `python3 - NAME...`
            words = ["python3", "-", *words[5:]]
        key = words[2] if words[:2] == ["python3", "-"] else "shell"
        with self.lock:
            self.calls.append((node, key, words))
            self.stdins.append(stdin)
        handler = self.handlers.get((node, key)) or self.handlers.get(("*", key))
        if handler is None:
            raise AssertionError(f"unscripted call on {node}: {command}")
        answer = handler(words)
        if isinstance(answer, Exception):
            raise answer
        return answer

    @staticmethod
    def _result(command: str, answer: Answer) -> Result:
        if isinstance(answer, Result):
            return answer
        lines = answer if isinstance(answer, list | Iterator) else [answer]
        return Result(command, 0, "".join(json.dumps(x) + "\n" for x in lines), "")

    def stream(
        self, node: str, command: str, on_line: Callable[[str], None], stdin: str | None = None
    ) -> Result:
        """Answer like run, line by line; a handler's iterator is streamed as it yields."""
        answer = self._answer(node, command, stdin)
        lines = (
            answer
            if isinstance(answer, Iterator)
            else iter(self._result(command, answer).stdout.splitlines())
        )
        try:
            for line in lines:
                on_line(line if isinstance(line, str) else json.dumps(line))
        except StopStream:
            pass
        return Result(command, 0, "", "")

    def http(self, node: str, port: int, method: str, path: str, *args: Any, **kwargs: Any) -> HttpResponse:
        """The head's API: /health answers `http_status`; nothing else is scripted."""
        if path == "/health":
            return HttpResponse(self.http_status, b"")
        raise NodeError(node, f"no scripted answer for {method} {path}")

    def close(self) -> None:
        """Nothing to release."""
