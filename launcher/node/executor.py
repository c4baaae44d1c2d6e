"""One interface for reaching nodes: run a command (stdin in, output out), speak HTTP to a port.

`ssh.SshExecutor` implements it over SSH; `LocalExecutor` runs everything on this
machine (for tests of the node-side logic without SSH). Both raise `NodeError` for a node
that cannot be reached, with the node's name, the reason and a hint.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol, TypeVar

from launcher.errors import ExitStatus, SparkLaunchError
from launcher.node.relay import OnSent, pump

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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class HttpResponse:
    """An HTTP answer from a node's port."""

    status: int
    body: bytes


class Stream(Protocol):
    """A command running on a node with stdin and stdout open as byte streams (for a relay)."""

    def send(self, data: bytes) -> None:
        """Write to the command's stdin."""

    def send_eof(self) -> None:
        """Close the command's stdin."""

    def recv(self, size: int) -> bytes:
        """Up to `size` bytes of its stdout; b"" at the end."""

    def stderr_lines(self) -> Iterator[str]:
        """Its stderr, line by line, until it ends."""

    def wait(self) -> int:
        """Its exit status, once it has ended."""

    def close(self) -> None:
        """Stop talking to it."""


@dataclass(frozen=True)
class Relayed:
    """A relay's outcome: the source command's result, each target's, and the bytes each got."""

    source: Result
    targets: dict[str, Result | NodeError]
    sent: dict[str, int]


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
        """Start a command whose stdin and stdout stay open as byte streams."""

    def relay(
        self, source: str, command: str, targets: dict[str, str], on_progress: OnSent | None = None
    ) -> Relayed:
        """Run `command` on `source`; its output, as it comes, is the stdin of every target's command."""

    def close(self) -> None:
        """Release every connection."""


def fan_out(names: Iterable[str], task: Callable[[str], T]) -> dict[str, T | SparkLaunchError]:
    """Run `task(name)` for every node at once; a node's error is its result, not a crash."""
    names = list(names)

    def guarded(name: str) -> T | SparkLaunchError:
        try:
            return task(name)
        except SparkLaunchError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        return dict(zip(names, pool.map(guarded, names), strict=True))


class LocalExecutor:
    """Every 'node' is this machine; files go under `home` instead of ~ (named nodes share it).

    `node_env` gives a node variables of its own, as a real node's login environment would.
    """

    def __init__(self, home: Path, node_env: dict[str, dict[str, str]] | None = None) -> None:
        self.home = home
        self.node_env = node_env or {}

    def _env(self, node: str) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.home), **self.node_env.get(node, {})}

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        """Run with bash in `home`, HOME pointing there."""
        done = subprocess.run(
            ["bash", "-c", command],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.home,
            env=self._env(node),
            timeout=timeout,
            check=False,
        )
        return Result(command, done.returncode, done.stdout, done.stderr)

    def stream(
        self, node: str, command: str, on_line: Callable[[str], None], stdin: str | None = None
    ) -> Result:
        """Run with bash, feeding lines as they come."""
        with subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=self.home,
            env=self._env(node),
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(stdin or "")
            proc.stdin.close()
            try:
                for line in proc.stdout:
                    on_line(line.rstrip("\n"))
            except StopStream:
                proc.kill()
        return Result(command, proc.returncode, "", "")

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
        """Plain HTTP to this machine."""
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            sent = {**({"Content-Type": "application/json"} if body else {}), **(headers or {})}
            conn.request(method, path, body, sent)
            response = conn.getresponse()
            return HttpResponse(response.status, response.read())
        except OSError as exc:
            raise NodeError(node, f"no answer on {host}:{port}: {exc}") from None
        finally:
            conn.close()

    def open(self, node: str, command: str) -> Stream:
        """Start the command with bash, its three streams piped."""
        proc = subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.home,
            env=self._env(node),
        )
        return LocalStream(proc)

    def relay(
        self, source: str, command: str, targets: dict[str, str], on_progress: OnSent | None = None
    ) -> Relayed:
        """Pipe one local command into others, through this process (as SSH does, through the launcher)."""
        with contextlib.ExitStack() as stack:
            outputs = {
                n: (
                    stack.enter_context(tempfile.TemporaryFile()),
                    stack.enter_context(tempfile.TemporaryFile()),
                )
                for n in targets
            }
            sinks = {
                n: subprocess.Popen(
                    ["bash", "-c", cmd],
                    stdin=subprocess.PIPE,
                    stdout=outputs[n][0],
                    stderr=outputs[n][1],
                    cwd=self.home,
                    env=self._env(n),
                )
                for n, cmd in targets.items()
            }
            src = subprocess.Popen(
                ["bash", "-c", command],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.home,
                env=self._env(source),
            )
            stdout = src.stdout
            assert stdout is not None
            writers = {n: _writer(p.stdin) for n, p in sinks.items() if p.stdin}
            sent, _ = pump(lambda: stdout.read(1 << 20), writers, (BrokenPipeError,), on_progress)
            if src.poll() is None and all(p.poll() is not None for p in sinks.values()):
                src.kill()  # nobody takes more
            for proc in sinks.values():
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()  # type: ignore[union-attr]
            results: dict[str, Result | NodeError] = {}
            for name, proc in sinks.items():
                proc.wait()
                out, err = (_read_back(f) for f in outputs[name])
                results[name] = Result(targets[name], proc.returncode, out, err)
            error = src.stderr.read().decode(errors="replace") if src.stderr else ""
            return Relayed(Result(command, src.wait(), "", error), results, sent)

    def close(self) -> None:
        """Nothing to release."""


class LocalStream:
    """A local process as a Stream."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.proc, self.stdin, self.stdout, self.stderr = proc, proc.stdin, proc.stdout, proc.stderr

    def send(self, data: bytes) -> None:
        """Write to stdin."""
        self.stdin.write(data)
        self.stdin.flush()

    def send_eof(self) -> None:
        """Close stdin."""
        self.stdin.close()

    def recv(self, size: int) -> bytes:
        """What stdout has now, up to `size` bytes."""
        return os.read(self.stdout.fileno(), size)

    def stderr_lines(self) -> Iterator[str]:
        """stderr, line by line."""
        for line in self.stderr:
            yield line.decode(errors="replace").rstrip("\n")

    def wait(self) -> int:
        """The exit status."""
        return self.proc.wait()

    def close(self) -> None:
        """Kill it if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _writer(stream: IO[bytes]) -> Callable[[bytes], None]:
    """Write whole blocks to a pipe."""

    def write(block: bytes) -> None:
        stream.write(block)

    return write


def _read_back(file: IO[bytes]) -> str:
    """What a command wrote to a temporary file."""
    file.seek(0)
    return file.read().decode(errors="replace")
