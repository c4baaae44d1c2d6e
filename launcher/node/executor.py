"""One interface for reaching nodes: run a command (stdin in, output out), speak HTTP to a port.

`ssh.SshExecutor` implements it over SSH (tests/fakes holds one that runs every "node" on
this machine). Both raise `NodeError` for a node that cannot be reached, with the node's
name, the reason and a hint. What moves bytes between nodes is `relay`, over `open()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from launcher.errors import ExitStatus, SparkLaunchError

T = TypeVar("T")


class NodeError(SparkLaunchError):
    """A node could not be reached or did not answer: which node, why, and what to do."""

    exit_status = ExitStatus.UNREACHABLE

    def __init__(self, node: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"node {node}: {reason}", hint)
        self.node = node
        self._reason = reason

    @property
    def reason(self) -> str:
        """What failed, without "node NAME:" (for a table or a line that names the node already)."""
        return self._reason


class StopStream(Exception):
    """Raised by a stream's `on_line` to end the stream: the executor closes it and returns."""


@dataclass(frozen=True, slots=True)
class Result:
    """A finished command: what ran, its exit status and its output."""

    command: str
    exited: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exited == 0

    def checked(self, node: str, what: str) -> Result:
        """This result if it succeeded; a NodeError naming the node, `what` and the output otherwise."""
        if self.ok:
            return self
        detail = (self.stderr or self.stdout).strip().splitlines()[-3:]
        raise NodeError(node, f"{what} failed (exit {self.exited}): {' / '.join(detail) or 'no output'}")


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """An HTTP answer from a node's port."""

    status: int
    body: bytes


class Stream(Protocol):
    """A command running on a node with its stdin, stdout and stderr open as byte streams.

    Whoever opens one drains both outputs (they share one window: see `output`).
    """

    def send(self, data: bytes) -> None:
        """Write to the command's stdin; OSError once it takes no more."""

    def send_eof(self) -> None:
        """Close the command's stdin."""

    def recv(self, size: int) -> bytes:
        """Up to `size` bytes of its stdout; b"" at the end."""

    def recv_stderr(self, size: int) -> bytes:
        """Up to `size` bytes of its stderr; b"" at the end."""

    def wait(self) -> int:
        """Its exit status, once it has ended."""

    def close(self) -> None:
        """Stop talking to it."""


class Executor(Protocol):
    """How the cluster operations reach a node, by the node's name."""

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        """Run a shell command on the node and wait for it."""

    def stream(
        self, node: str, command: str, on_line: Callable[[str], None], stdin: str | None = None
    ) -> Result:
        """Run a command, handing each output line to `on_line` as it arrives (until it raises StopStream)."""

    def http(
        self,
        node: str,
        port: int,
        method: str,
        path: str,
        body: bytes | None = None,
        timeout: float = 10.0,
        host: str = "127.0.0.1",
        headers: dict[str, str] | None = None,
    ) -> HttpResponse:
        """An HTTP request to host:port as seen from the node (through the SSH connection)."""

    def open(self, node: str, command: str) -> Stream:
        """Start a command whose stdin, stdout and stderr stay open as byte streams."""

    def close(self) -> None:
        """Release every connection."""


def fan_out(names: Iterable[str], task: Callable[[str], T]) -> dict[str, T | SparkLaunchError]:
    """Run `task(name)` for every node at once; a node's error is its result, not a crash.

    Every task ends before this returns (or raises what is not a SparkLaunchError, a bug).
    """
    names = list(names)

    def guarded(name: str) -> T | SparkLaunchError:
        try:
            return task(name)
        except SparkLaunchError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        return dict(zip(names, pool.map(guarded, names), strict=True))
