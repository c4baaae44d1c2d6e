"""What every node script shares (`common.py`), where it stands in for the standard library."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from launcher.node.scripts.common import which


def test_which_finds_what_shutil_which_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Node scripts look programs up with common.which (shutil costs their start): as shutil does."""
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (tmp_path / "bin" / "plain").write_text("not executable")
    (tmp_path / "bin" / "folder").mkdir(mode=0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'none'}:{tmp_path / 'bin'}:/usr/bin:/bin")
    for program in ("tool", "plain", "folder", "sh", "no-such-program-here"):
        assert which(program) == shutil.which(program), program
    assert which("tool") == str(tool)
    monkeypatch.setenv("PATH", "")
    monkeypatch.chdir(tool.parent)
    assert which("tool") is None is shutil.which("tool")
