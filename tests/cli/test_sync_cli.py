"""`spark-launch sync models` at the command line: its help, and how progress is shown."""

from __future__ import annotations

import io

from launcher.cli.sync_commands import TransferPrinter
from launcher.core.sync.transfer_plan import CopyProgress
from tests.invoke import invoke

MB = 1_000_000


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_sync_is_a_group_with_models() -> None:
    result = invoke(["sync", "--help"])
    assert result.exit_code == 0 and "models" in result.output
    result = invoke(["sync", "models", "--help"])
    assert result.exit_code == 0
    for option in ("--from", "--dry-run", "--relay", "--bwlimit", "--json", "--ssh-config"):
        assert option in result.output
    assert "ssh-copy-id" in result.output and "Examples:" in result.output


def test_in_a_log_progress_is_a_plain_line_per_tenth_or_every_few_seconds() -> None:
    out = io.StringIO()
    printer = TransferPrinter(out)
    p = CopyProgress(1000 * MB, started=0.0, at=0.0)
    for done in range(0, 1001, 25):  # 41 updates, in quick succession
        p = p.advance(done * MB, p.at + 0.5)
        printer.progress("node2", p)
    lines = out.getvalue().splitlines()
    assert len(lines) == 11  # 0%, 10%, ... 100%
    assert lines[-1].startswith("node2") and " 100% " in lines[-1]
    assert "\x1b[" not in out.getvalue()


def test_on_a_terminal_the_lines_are_redrawn_in_place() -> None:
    out = Terminal()
    printer = TransferPrinter(out)
    two, three = CopyProgress(100, 10, 5.0, 0.0, 1.0), CopyProgress(100, 20, 5.0, 0.0, 1.0)
    printer.progress("node2", two)
    printer.progress("node3", three)
    printer.info("node2: verifying")
    text = out.getvalue()
    assert text.count("\x1b[1F\x1b[J") == 1 and text.count("\x1b[2F\x1b[J") == 1  # erased, redrawn
    assert text.endswith(f"\x1b[2F\x1b[Jnode2: verifying\n{two.line('node2', 6)}\n{three.line('node3', 6)}\n")
