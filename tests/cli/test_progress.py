"""`up`'s progress: vLLM's own progress lines read into per-node stages, shown live on a
terminal and as plain lines when piped. The log is a real head's, recorded on the test bed
(vLLM 0.32 CPU build, the tiny model in five safetensors shards)."""

from __future__ import annotations

import io
import re

import pytest

from launcher.cli.progress import UP, Printer
from launcher.core.serving.startup_log import NodeWatch, progress_of
from tests.conftest import ROOT

RECORDED = (ROOT / "tests" / "data" / "head-start-weights.log").read_text()


def replay(printer: Printer) -> None:
    """Feed the recorded log line by line, as the node's watch streams it."""
    watch, offset = NodeWatch("node1", 0), 0
    for number, line in enumerate(RECORDED.splitlines(keepends=True)):
        offset += len(line.encode())
        watch.feed(line, offset)
        printer.stages({"node1": watch.display, "node2": "loading weights"}, float(number))


def test_plain_lines_show_each_stage_and_hold_back_progress_within_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("launcher.cli.progress.time.monotonic", lambda: 1000.0)  # the whole log at once
    out = io.StringIO()
    replay(Printer(out, live=False))
    lines = out.getvalue().splitlines()
    assert [x.split("] ", 1)[1] for x in lines if "node1:" in x] == [
        "node1: started",
        "node1: configuring",
        "node1: rendezvous",
        "node1: loading weights",
        "node1: KV cache",
        "node1: API up",
    ]


def test_plain_lines_show_every_progress_step_when_they_are_seconds_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter(range(0, 10_000, 3))
    monkeypatch.setattr("launcher.cli.progress.time.monotonic", lambda: float(next(clock)))
    out = io.StringIO()
    replay(Printer(out, live=False))
    shown = [x.split("node1: ", 1)[1] for x in out.getvalue().splitlines() if "node1:" in x]
    assert shown[4:7] == [
        "loading weights (0/5 shards, 0%)",
        "loading weights (2/5 shards, 40%, 00:00 left)",
        "loading weights (5/5 shards, 100%, 00:00 left)",
    ]
    assert "loading weights (took 0.48 s)" in shown


def test_on_a_terminal_the_block_is_redrawn_in_place() -> None:
    out = io.StringIO()
    printer = Printer(out, live=True)
    replay(printer)
    printer.info("demo serves tiny-qwen3-next")
    text = out.getvalue()
    assert text.count(UP.format(n=2)) >= 7  # each change redraws the two-line block
    tail = text.rsplit(UP.format(n=2), 1)[1].splitlines()
    assert tail[0] == "demo serves tiny-qwen3-next"  # an info line goes above the block
    assert tail[1].endswith("node1  API up") and tail[2].endswith("node2  loading weights")


@pytest.mark.parametrize(
    ("stage", "log", "expected"),
    [
        (
            "loading weights",
            "Loading safetensors checkpoint shards:  60% Completed | 3/5 [00:03<00:02,",
            "3/5 shards, 60%, 00:02 left",
        ),
        ("loading weights", "Loading weights took 83.31 seconds", "took 83.31 s"),
        # vLLM's CUDA-graph capture bar and compile summary, as its GPU builds print them (no GPU here)
        (
            "CUDA graphs",
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  51%|█████     "
            "| 34/67 [00:03<00:03, 10.2it/s]",
            "34/67 graphs, 51%, 00:03 left",
        ),
        ("compiling", "torch.compile takes 24.61 s in total", "took 24.61 s"),
        ("KV cache", "Available KV cache memory: 61.2 GiB", None),
    ],
)
def test_progress_of_each_stage(stage: str, log: str, expected: str | None) -> None:
    assert progress_of(log, stage) == expected


def test_node_text_reaches_the_terminal_with_control_characters_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A node's log or error may hold escape sequences (clear the screen, retitle, hide text):
    shown, not obeyed; lines and tabs stay."""
    from launcher.cli.shared import echo
    from launcher.errors import printable

    hostile = "ok\tline\n\x1b[2J\x1b]0;owned\x07gone\u202eright"
    assert printable(hostile) == "ok\tline\n\\x1b[2J\\x1b]0;owned\\x07gone\\u202eright"
    out = io.StringIO()
    Printer(out, live=True).info(hostile)
    Printer(out, live=True).stages({"n1": "\x1b[31mred"}, 1.0)
    echo(hostile)
    echo(hostile, err=True)
    shown = out.getvalue().replace(UP.format(n=1), "") + "".join(capsys.readouterr())
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert shown.count("\\x1b[2J") == 3 and "\\x1b[31mred" in shown


def test_the_cli_prints_only_through_the_escaping_echo() -> None:
    cli = ROOT / "launcher" / "cli"
    raw = [p.name for p in cli.glob("*.py") if p.name != "shared.py" and "click.echo(" in p.read_text()]
    importing = re.compile(r"from click import .*\becho\b")
    imported = [p.name for p in cli.glob("*.py") if importing.search(p.read_text())]
    assert raw == [] and imported == []


def test_the_launchers_own_marks_pass_and_no_other_escape_does() -> None:
    from launcher.core.terminal import STYLES, Screen
    from launcher.errors import printable

    marked = "".join(Screen(80, color=True).paint(style, style) for style in STYLES)
    assert printable(marked) == marked  # every style core/terminal.py paints, and its reset
    assert printable("\x1b[8mhidden\x1b[0m\x1b[1A") == "\\x1b[8mhidden\x1b[0m\\x1b[1A"
