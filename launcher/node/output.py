"""Running a command over a Stream: its output read, both streams at once, each up to a limit.

A command's stdout and stderr share one SSH window: left unread, either one stalls the
other, so each is drained on its own thread as it comes. What the launcher keeps of a node
command is bounded (no answer of ours comes near the limits): past a limit it stops
reading, ends the command, and says so, naming the node.
"""

from __future__ import annotations

import contextlib
import http.client
import threading
from collections.abc import Callable, Iterator

from launcher.core.remote import brief
from launcher.node.executor import HttpResponse, NodeError, Result, StopStream, Stream

MAX_STDOUT = 32 << 20  # a node script's answer, or one line of a stream
MAX_STDERR = 4 << 20
MAX_HTTP = 32 << 20  # an HTTP answer from a node's port (/metrics, a completion, /v1/models)
CHUNK = 1 << 16

Read = Callable[[int], bytes]


class TooMuch(Exception):
    """A node command wrote more than the launcher keeps."""

    def __init__(self, which: str, limit: int) -> None:
        super().__init__(f"wrote more than {limit >> 20} MiB on {which}")
        self.which, self.limit = which, limit


def too_much(node: str, command: str, exc: TooMuch) -> NodeError:
    """The NodeError for a command that wrote more than we keep."""
    # The stub's text as STUB: the script's name shows within the first hundred characters.
    command = brief(command)
    shown = command if len(command) <= 130 else command[:127] + "..."
    return NodeError(
        node,
        f"`{shown}` {exc}: stopped it there",
        "no answer of spark-launch's node scripts is that large: look at what runs as python3 "
        "(or that command) on the node",
    )


class Drain:
    """One output stream read to its end on a thread of its own, up to `limit` bytes.

    Past the limit, `stop` ends the command (so that the other stream ends too) and `wait`
    raises TooMuch. With `patient`, a read that times out is tried again: the other stream
    keeps the command's deadline.
    """

    def __init__(self, read: Read, limit: int, which: str, stop: Callable[[], None], patient: bool) -> None:
        self.read, self.limit, self.which, self.stop, self.patient = read, limit, which, stop, patient
        self.data = bytearray()
        self.failure: BaseException | None = None
        self.ended = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            while not self.ended.is_set():
                try:
                    block = self.read(CHUNK)
                except TimeoutError:
                    if self.patient:
                        continue
                    raise
                if not block:
                    break
                if len(self.data) + len(block) > self.limit:
                    self.failure = TooMuch(self.which, self.limit)
                    self.stop()
                    break
                self.data += block
        except (OSError, EOFError) as exc:
            self.failure = exc
        finally:
            self.ended.set()

    def wait(self, timeout: float | None = None) -> bytes:
        """Everything read, once the stream ended; its failure (TooMuch, a lost connection) raised."""
        if not self.ended.wait(timeout):
            self.ended.set()
            raise TimeoutError(f"{self.which} did not end within {timeout} s")
        if self.failure is not None:
            raise self.failure
        return bytes(self.data)


def lines(read: Read, limit: int, stop: Callable[[], None]) -> Iterator[bytes]:
    """The stream's lines as they come (without the newline); TooMuch for a line over `limit`."""
    buffer = bytearray()
    for block in iter(lambda: read(CHUNK), b""):
        buffer += block
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
        if len(buffer) > limit:
            stop()
            raise TooMuch("stdout (one line)", limit)
    if buffer:
        yield bytes(buffer)


def read_body(node: str, what: str, read: Read, limit: int = MAX_HTTP) -> bytes:
    """An HTTP answer's body, read up to `limit` bytes: past it, a NodeError naming the node."""
    data = bytearray()
    while block := read(min(CHUNK, limit + 1 - len(data))):
        data += block
        if len(data) > limit:
            raise NodeError(
                node,
                f"{what} answered more than {limit >> 20} MiB: stopped reading there",
                "no answer of vLLM's API is that large: look at what listens on that port",
            )
    return bytes(data)


def exchange(
    node: str,
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str] | None,
) -> HttpResponse:
    """One HTTP request on `conn` (JSON when there is a body), its answer read up to MAX_HTTP;
    a failure is a NodeError naming the node."""
    where = f"HTTP {method} {path} on {conn.host}:{conn.port}"
    sent = {**({"Content-Type": "application/json"} if body is not None else {}), **(headers or {})}
    try:
        conn.request(method, path, body, sent)
        response = conn.getresponse()
        return HttpResponse(response.status, read_body(node, where, response.read))
    except (OSError, http.client.HTTPException) as exc:
        raise NodeError(node, f"{where} failed: {exc or type(exc).__name__}") from None


def collect(node: str, command: str, stream: Stream, stdin: str | None, timeout: float | None) -> Result:
    """Send stdin, then read stdout and stderr at once to their end; the command's Result.

    Past a limit the command is ended and this is a NodeError naming the node. `timeout`
    bounds each wait for stdout (as the stream's reads do); stderr then gets as long.
    """
    with contextlib.closing(stream):
        _send(stream, stdin)
        err = Drain(stream.recv_stderr, MAX_STDERR, "stderr", stream.close, patient=True)
        out = Drain(stream.recv, MAX_STDOUT, "stdout", stream.close, patient=False)
        try:
            stdout, stderr = out.wait(), err.wait(timeout)
        except TooMuch as exc:
            raise too_much(node, command, exc) from None
        return Result(
            command, stream.wait(), stdout.decode(errors="replace"), stderr.decode(errors="replace")
        )


def follow(
    node: str, command: str, stream: Stream, on_line: Callable[[str], None], stdin: str | None
) -> Result:
    """Send stdin, then hand each stdout line to `on_line` as it comes (stderr drained meanwhile).

    The stream is closed on every way out: on StopStream (or an error in `on_line`) the
    command sees its next write fail, and ends.
    """
    with contextlib.closing(stream):
        _send(stream, stdin)
        err = Drain(stream.recv_stderr, MAX_STDERR, "stderr", stream.close, patient=True)
        try:
            for line in lines(stream.recv, MAX_STDOUT, stream.close):
                on_line(line.decode(errors="replace"))
            stderr = err.wait()
        except StopStream:
            return Result(command, -1, "", "")
        except TooMuch as exc:
            raise too_much(node, command, exc) from None
        return Result(command, stream.wait(), "", stderr.decode(errors="replace"))


def _send(stream: Stream, stdin: str | None) -> None:
    with contextlib.suppress(BrokenPipeError):  # it ended without reading it all: its output says why
        if stdin is not None:
            stream.send(stdin.encode())
        stream.send_eof()
