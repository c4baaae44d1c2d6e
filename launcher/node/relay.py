"""The one relay: bytes from node to node through this machine, over `Executor.open()` streams.

`copy_to_all`: one source's stdout into the stdin of several targets at once (`sync images`:
one `docker save` feeds every `docker load`). A reader thread fills a bounded queue while
this thread writes each block to every target still taking data, so reading the source
(decrypting, for SSH) and writing the targets (encrypting) overlap. A target whose writes
fail is dropped and the others go on; when none is left, the source is stopped.

`bridge`: two streams joined both ways (`sync models --relay`: the source's rsync and the
receiver on the target); each direction ends by closing the other side's stdin.

Every stream's other outputs are drained as they come and kept up to a limit (`output`).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from launcher.node.executor import Executor, NodeError, Result, Stream
from launcher.node.output import MAX_STDERR, MAX_STDOUT, Drain, TooMuch, too_much

OnSent = Callable[[str, int], None]  # (target, bytes it has been sent so far)
CHUNK = 1 << 20
QUEUE_BLOCKS = 32
BROKEN = (OSError, EOFError)  # what a stream's send raises once its command takes no more


@dataclass(frozen=True, slots=True)
class Relayed:
    """A relay's outcome: the source command's result, each target's, and the bytes each got."""

    source: Result
    targets: dict[str, Result | NodeError]
    sent: dict[str, int]


def copy_to_all(
    executor: Executor, source: str, command: str, targets: dict[str, str], on_progress: OnSent | None = None
) -> Relayed:
    """Run `command` on `source`; its stdout, as it comes, is the stdin of every target's command."""
    sinks: dict[str, Stream] = {}
    results: dict[str, Result | NodeError] = {}
    with contextlib.ExitStack() as stack:
        for name, cmd in targets.items():
            try:
                sinks[name] = executor.open(name, cmd)
                stack.callback(sinks[name].close)
            except NodeError as exc:
                results[name] = exc
        src = executor.open(source, command)
        stack.callback(src.close)
        outputs = {n: _outputs(s) for n, s in sinks.items()}
        said = Drain(src.recv_stderr, MAX_STDERR, "stderr", src.close, patient=False)
        pumped = pump(lambda: src.recv(CHUNK), {n: s.send for n, s in sinks.items()}, on_progress)
        if pumped.failure is not None:
            raise NodeError(source, f"the stream from `{command}` broke: {pumped.failure}")
        if not pumped.complete:
            src.close()  # nobody takes more: the source's command sees its next write fail
        for name, sink in sinks.items():
            results[name] = _finish(name, targets[name], sink, outputs[name])
        error = _said(source, command, said)
        return Relayed(
            Result(command, src.wait() if pumped.complete else -1, "", error), results, pumped.sent
        )


def _outputs(stream: Stream) -> tuple[Drain, Drain]:
    return (
        Drain(stream.recv, MAX_STDOUT, "stdout", stream.close, patient=False),
        Drain(stream.recv_stderr, MAX_STDERR, "stderr", stream.close, patient=False),
    )


def _finish(name: str, command: str, sink: Stream, outputs: tuple[Drain, Drain]) -> Result | NodeError:
    """A target's result once its stdin is closed: exit status and output (or why there is none)."""
    with contextlib.suppress(*BROKEN):
        sink.send_eof()
    try:
        out, err = (d.wait() for d in outputs)
        return Result(command, sink.wait(), out.decode(errors="replace"), err.decode(errors="replace"))
    except TooMuch as exc:
        return too_much(name, command, exc)
    except BROKEN as exc:
        return NodeError(name, f"connection lost: {exc}")


def _said(name: str, command: str, drain: Drain) -> str:
    """What the source wrote on stderr (or why it cannot be told)."""
    try:
        return drain.wait().decode(errors="replace")
    except TooMuch as exc:
        return too_much(name, command, exc).reason
    except BROKEN as exc:
        return f"connection lost: {exc}"


@dataclass(frozen=True, slots=True)
class Pumped:
    """What a pump did: bytes per sink, the source's error, and whether it was read to its end."""

    sent: dict[str, int]
    failure: BaseException | None
    complete: bool


def pump(
    read: Callable[[], bytes], sinks: dict[str, Callable[[bytes], None]], on_progress: OnSent | None = None
) -> Pumped:
    """Write what `read` returns (b"" at the end) to every sink still taking it."""
    blocks: queue.Queue[bytes] = queue.Queue(maxsize=QUEUE_BLOCKS)
    done = threading.Event()
    failure: list[BaseException] = []
    reader = threading.Thread(target=_read_all, args=(read, blocks, done, failure), daemon=True)
    reader.start()
    sent = dict.fromkeys(sinks, 0)
    live, complete = set(sinks), False
    try:
        while live and not complete:
            block = blocks.get()
            complete = not block
            for name in sorted(live) if block else ():
                try:
                    sinks[name](block)
                except BROKEN:  # its command ended early: its own result says why
                    live.discard(name)
                    continue
                sent[name] += len(block)
                if on_progress:
                    on_progress(name, sent[name])
    finally:
        done.set()
    reader.join(timeout=5)
    return Pumped(sent, failure[0] if failure else None, complete and not failure)


def _read_all(
    read: Callable[[], bytes], blocks: queue.Queue[bytes], done: threading.Event, failure: list[BaseException]
) -> None:
    """Read until the end, an error or `done`; the last block put is always b""."""
    block = b"x"
    while block and not done.is_set():
        try:
            block = read()
        except BROKEN as exc:
            failure.append(exc)
            block = b""
        while not done.is_set():
            try:
                blocks.put(block, timeout=0.2)
                break
            except queue.Full:
                continue


def bridge(one: Stream, other: Stream) -> list[threading.Thread]:
    """Join two streams both ways: each one's stdout into the other's stdin, until each ends."""
    return [_direction(one.recv, other), _direction(other.recv, one)]


def _direction(read: Callable[[int], bytes], into: Stream) -> threading.Thread:
    """Copy one direction until its end, then close the other side's stdin."""

    def run() -> None:
        try:
            for chunk in iter(lambda: read(1 << 16), b""):
                into.send(chunk)
            into.send_eof()
        except BROKEN:
            pass  # the other side went away: its own status says why

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
