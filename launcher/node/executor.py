"""One interface for reaching nodes: run a command (stdin in, output out), speak HTTP to a port.

`ssh.SshExecutor` implements it over SSH (tests/fakes holds one that runs every "node" on
this machine). Both raise `NodeError` for a node that cannot be reached, with the node's
name, the reason and a hint. What moves bytes between nodes is `relay`, over `open()`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

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


def fan_out(
    names: Iterable[str], task: Callable[[str], T], finish: bool = False
) -> dict[str, T | SparkLaunchError]:
    """Run `task(name)` for every node at once; a node's error is its result, not a crash.

    Every task ends before this returns (or raises what is not a SparkLaunchError, a bug).
    Ctrl-C ends the wait at once (see `concurrently`); with `finish`, the tasks under way are let
    finish first (what starts a process must not be cut off half-way).
    """
    names = list(names)
    return concurrently({name: (lambda name=name: task(name)) for name in names}, finish)  # type: ignore[misc]


POLL = 0.1  # seconds between two looks at the tasks: the longest a Ctrl-C waits to be seen


def concurrently(
    tasks: Mapping[str, Callable[[], T]], finish: bool = False
) -> dict[str, T | SparkLaunchError]:
    """Run every task at once, each in a thread of its own; each one's result or SparkLaunchError.

    The threads are daemons and this thread waits for them in short steps, so Ctrl-C
    (KeyboardInterrupt, only ever raised in the main thread) ends the wait at once, and the
    program exits without waiting on a connection that hangs: the caller then closes the
    connections, which ends the tasks still waiting on them. With `finish`, the tasks under way
    are waited for before the KeyboardInterrupt goes on (a second Ctrl-C stops waiting).
    A task raising what is not a SparkLaunchError is a bug: raised here, once every task ended.
    """
    results: dict[str, T | SparkLaunchError] = {}
    crashes: list[BaseException] = []
    lock = threading.Lock()
    done = threading.Event()

    def run(name: str, task: Callable[[], T]) -> None:
        value: T | SparkLaunchError
        try:
            value = task()
        except SparkLaunchError as exc:
            value = exc
        except BaseException as exc:  # a bug: the caller's thread raises it
            crashes.append(exc)
            value = SparkLaunchError(f"{type(exc).__name__}: {exc}")
        with lock:
            results[name] = value
            if len(results) == len(tasks):
                done.set()

    if not tasks:
        return {}
    threads = [
        threading.Thread(target=run, args=(name, task), name=f"task {name}", daemon=True)
        for name, task in tasks.items()
    ]
    for thread in threads:
        thread.start()
    try:
        while not done.wait(POLL):
            pass
    except KeyboardInterrupt:
        if finish:
            for thread in threads:
                thread.join()
        raise
    if crashes:
        raise crashes[0]
    return {name: results[name] for name in tasks}


class Background(Generic[T]):
    """A task run in a daemon thread of its own while this thread does something else; `result()`
    waits for it in short steps (Ctrl-C is seen at once) and returns its value or raises its error."""

    def __init__(self, task: Callable[[], T]) -> None:
        self._value: list[T] = []
        self._error: list[BaseException] = []
        self._done = threading.Event()
        threading.Thread(target=self._run, args=(task,), name="background task", daemon=True).start()

    def _run(self, task: Callable[[], T]) -> None:
        try:
            self._value.append(task())
        except BaseException as exc:  # handed to whoever waits for the result
            self._error.append(exc)
        finally:
            self._done.set()

    def result(self) -> T:
        """The task's value, once it ended; what it raised, raised here."""
        while not self._done.wait(POLL):
            pass
        if self._error:
            raise self._error[0]
        return self._value[0]
