"""A FAKE cluster of nodes that are all this machine: the Executor for the fast tier.

Commands run with bash in `home` (HOME points there; named nodes share it), through the same
`node.output` code as SSH: both outputs drained at once, each up to the limits. `node_env`
gives a node variables of its own, as a real node's login environment would. The home keeps
the launcher's unit already, as a node used before does (`kept=False`: a fresh node, to which
the first script call sends it). For the node-side logic without SSH; the real SSH path runs on
the test bed.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from launcher.node import output
from launcher.node.executor import HttpResponse, Result, Stream
from tests.node_scripts import keep_unit


class LocalExecutor:
    """Every 'node' is this machine; files go under `home` instead of ~."""

    def __init__(
        self, home: Path, node_env: dict[str, dict[str, str]] | None = None, kept: bool = True
    ) -> None:
        self.home = home
        self.node_env = node_env or {}
        self.kept = kept  # the unit is put in the home before the first command runs there

    def _env(self, node: str) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.home), **self.node_env.get(node, {})}

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        """Run with bash in `home`; killed after `timeout` seconds."""
        stream = self._open(node, command)
        timer = threading.Timer(timeout, stream.kill) if timeout else None
        if timer is not None:
            timer.start()
        try:
            return output.collect(node, command, stream, stdin, None)
        finally:
            if timer is not None:
                timer.cancel()

    def stream(
        self, node: str, command: str, on_line: Callable[[str], None], stdin: str | None = None
    ) -> Result:
        """Run with bash, feeding lines as they come."""
        return output.follow(node, command, self._open(node, command), on_line, stdin)

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
            return output.exchange(node, conn, method, path, body, headers)
        finally:
            conn.close()

    def open(self, node: str, command: str) -> Stream:
        """Start the command with bash, its three streams piped."""
        return self._open(node, command)

    def _open(self, node: str, command: str) -> LocalStream:
        if self.kept and self.home.is_dir():
            self.kept = False
            with contextlib.suppress(OSError):  # a home that cannot hold it: the agent carries it
                keep_unit(self.home)
        proc = subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.home,
            env=self._env(node),
        )
        return LocalStream(proc)

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
        with contextlib.suppress(BrokenPipeError):  # it ended without reading all of it
            self.stdin.close()

    def recv(self, size: int) -> bytes:
        """What stdout has now, up to `size` bytes."""
        return _read(self.stdout, size)

    def recv_stderr(self, size: int) -> bytes:
        """What stderr has now, up to `size` bytes."""
        return _read(self.stderr, size)

    def wait(self) -> int:
        """The exit status."""
        return self.proc.wait()

    def kill(self) -> None:
        """Kill it (its pipes then end)."""
        if self.proc.poll() is None:
            self.proc.kill()

    def close(self) -> None:
        """Kill it if it still runs (its pipes then end: they are left open for readers)."""
        self.kill()
        self.proc.wait()


def _read(pipe: IO[bytes], size: int) -> bytes:
    """Up to `size` bytes from a pipe (b"" once it is closed, here or there)."""
    try:
        return os.read(pipe.fileno(), size)
    except (OSError, ValueError):
        return b""
