"""Copy one stream into several, as it comes: the relay under `Executor.relay` (SSH and local).

A reader thread fills a bounded queue while this thread writes each block to every sink
still taking data, so reading the source (decrypting, for SSH) and writing the sinks
(encrypting) overlap. A sink whose writes fail is dropped and the others go on; when none
is left, reading stops.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

OnSent = Callable[[str, int], None]  # (sink, bytes it has been sent so far)
QUEUE_BLOCKS = 32


def pump(
    read: Callable[[], bytes],
    sinks: dict[str, Callable[[bytes], None]],
    broken: tuple[type[BaseException], ...],
    on_progress: OnSent | None = None,
) -> tuple[dict[str, int], BaseException | None]:
    """Write what `read` returns (b"" at the end) to every sink; bytes per sink, and the read's error."""
    blocks: queue.Queue[bytes] = queue.Queue(maxsize=QUEUE_BLOCKS)
    done = threading.Event()
    failure: list[BaseException] = []
    reader = threading.Thread(target=_read_all, args=(read, blocks, done, failure, broken), daemon=True)
    reader.start()
    sent = dict.fromkeys(sinks, 0)
    live = set(sinks)
    try:
        while live:
            block = blocks.get()
            if not block:
                break
            for name in sorted(live):
                try:
                    sinks[name](block)
                except broken:  # its command ended early: its own result says why
                    live.discard(name)
                    continue
                sent[name] += len(block)
                if on_progress:
                    on_progress(name, sent[name])
    finally:
        done.set()
    reader.join(timeout=5)
    return sent, (failure[0] if failure else None)


def _read_all(
    read: Callable[[], bytes],
    blocks: queue.Queue[bytes],
    done: threading.Event,
    failure: list[BaseException],
    broken: tuple[type[BaseException], ...],
) -> None:
    """Read until the end, an error or `done`; the last block put is always b""."""
    block = b"x"
    while block and not done.is_set():
        try:
            block = read()
        except broken as exc:
            failure.append(exc)
            block = b""
        while not done.is_set():
            try:
                blocks.put(block, timeout=0.2)
                break
            except queue.Full:
                continue
