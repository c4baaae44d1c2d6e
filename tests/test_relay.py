"""The relay under `sync images`: one stream copied into several, a broken sink dropped, the rest going on."""

from __future__ import annotations

from pathlib import Path

from launcher.node.executor import LocalExecutor
from launcher.node.relay import pump


def test_every_sink_gets_every_block_and_a_broken_one_is_dropped() -> None:
    blocks = iter([b"aa", b"bbb", b"c", b""])
    kept: list[bytes] = []
    progress: list[tuple[str, int]] = []

    def breaks_at_second(block: bytes) -> None:
        if block == b"bbb":
            raise BrokenPipeError

    sent, failed = pump(
        lambda: next(blocks),
        {"ok": kept.append, "bad": breaks_at_second},
        (BrokenPipeError,),
        lambda n, s: progress.append((n, s)),
    )
    assert failed is None and b"".join(kept) == b"aabbbc"
    assert sent == {"ok": 6, "bad": 2}
    assert progress[-1] == ("ok", 6) and ("bad", 2) in progress


def test_a_failing_source_is_reported() -> None:
    def read() -> bytes:
        raise OSError("connection lost")

    sent, failed = pump(read, {"n2": lambda block: None}, (OSError,))
    assert sent == {"n2": 0} and isinstance(failed, OSError)


def test_the_local_relay_feeds_each_target_and_keeps_their_results(tmp_path: Path) -> None:
    executor = LocalExecutor(tmp_path)
    relayed = executor.relay(
        "n1",
        "head -c 3000000 /dev/zero",
        {"n2": "wc -c", "n3": "head -c 10 > /dev/null; echo early >&2; exit 3"},
    )
    assert relayed.source.ok
    n2, n3 = relayed.targets["n2"], relayed.targets["n3"]
    assert not isinstance(n2, Exception) and n2.stdout.strip() == "3000000" and relayed.sent["n2"] == 3000000
    assert not isinstance(n3, Exception) and n3.exited == 3 and n3.stderr.strip() == "early"
