"""The one relay (launcher/node/relay.py) over local streams: one source into several targets
(`sync images`), and two commands joined both ways (`sync models --relay`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from launcher.node.executor import NodeError
from launcher.node.relay import bridge, copy_to_all, pump
from tests.fakes.local import LocalExecutor


def test_every_sink_gets_every_block_and_a_broken_one_is_dropped() -> None:
    blocks = iter([b"aa", b"bbb", b"c", b""])
    kept: list[bytes] = []
    progress: list[tuple[str, int]] = []

    def breaks_at_second(block: bytes) -> None:
        if block == b"bbb":
            raise BrokenPipeError

    pumped = pump(
        lambda: next(blocks),
        {"ok": kept.append, "bad": breaks_at_second},
        lambda n, s: progress.append((n, s)),
    )
    assert pumped.failure is None and pumped.complete and b"".join(kept) == b"aabbbc"
    assert pumped.sent == {"ok": 6, "bad": 2}
    assert progress[-1] == ("ok", 6) and ("bad", 2) in progress


def test_a_failing_source_is_reported() -> None:
    def read() -> bytes:
        raise OSError("connection lost")

    pumped = pump(read, {"n2": lambda block: None})
    assert pumped.sent == {"n2": 0} and isinstance(pumped.failure, OSError) and not pumped.complete


def test_one_source_feeds_every_target_and_each_keeps_its_result(tmp_path: Path) -> None:
    relayed = copy_to_all(
        LocalExecutor(tmp_path),
        "n1",
        "head -c 3000000 /dev/urandom | tee source.bin",
        {"n2": "sha256sum", "n3": "head -c 10 > /dev/null; echo early >&2; exit 3"},
    )
    assert relayed.source.ok
    n2, n3 = relayed.targets["n2"], relayed.targets["n3"]
    digest = hashlib.sha256((tmp_path / "source.bin").read_bytes()).hexdigest()
    assert not isinstance(n2, NodeError) and n2.stdout.split()[0] == digest and relayed.sent["n2"] == 3000000
    assert not isinstance(n3, NodeError) and n3.exited == 3 and n3.stderr.strip() == "early"


def test_when_every_target_has_left_the_source_is_stopped(tmp_path: Path) -> None:
    """A source that would write forever ends once nobody takes its output."""
    relayed = copy_to_all(LocalExecutor(tmp_path), "n1", "cat /dev/zero", {"n2": "head -c 1 > /dev/null"})
    n2 = relayed.targets["n2"]
    assert relayed.source.exited == -1 and not isinstance(n2, NodeError) and n2.ok


def test_two_commands_joined_both_ways_talk_to_each_other(tmp_path: Path) -> None:
    """As rsync and its receiver do: each one's stdout is the other's stdin, until each ends."""
    executor = LocalExecutor(tmp_path)
    asker = executor.open("n1", 'echo ping; read answer; echo "got $answer" > asked.txt')
    answerer = executor.open("n2", 'read question; echo "pong to $question"')
    for thread in bridge(asker, answerer):
        thread.join(10)
    assert asker.wait() == 0 and answerer.wait() == 0
    assert (tmp_path / "asked.txt").read_text() == "got pong to ping\n"
