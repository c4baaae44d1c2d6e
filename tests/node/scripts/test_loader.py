"""The loader that runs each node script: the command line a script call sends, its stdin (the
loader's line, then the script), run here as a node runs it, in a home of the test's own."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from launcher.core import remote
from launcher.node.agent import stdin_of
from launcher.node.scripts import loader_line
from tests.node_scripts import HANG

# A script that says how it was run: its argv after the loader, its name, its first line.
SCRIPT = 'import json, sys\nprint(json.dumps({"argv": sys.argv[1:], "name": __name__, "said": SAID}))\n'


def source(said: str) -> str:
    return f"SAID = {said!r}\n{SCRIPT}"


def run(home: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`text` run as the node script "toy" is: its call's command line, the loader's line first."""
    call = remote.script("toy", "DIR", *args)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        call.command,
        shell=True,
        input=loader_line() + text,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
        env={**env, "HOME": str(home)},
    )


def answer(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr
    said: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return said


def kept(home: Path) -> list[Path]:
    return sorted((home / ".spark-launch" / "cache" / "scripts").glob("toy-*.py"))


def test_a_script_call_sends_the_loader_then_the_script() -> None:
    call = remote.status_call("DIR")
    assert shlex.split(call.command)[:5] == ["python3", "-S", "-c", remote.SCRIPT_STAGE, "rank_status"]
    sent = stdin_of(call)
    assert sent is not None and sent.startswith(loader_line()) and loader_line().count("\n") == 1
    ast.parse(loader_line(), feature_version=(3, 8))  # nodes' python3 may be old


def test_the_script_runs_as_main_with_its_arguments_and_is_kept_compiled(tmp_path: Path) -> None:
    said = answer(run(tmp_path, source("first"), "a b", "c"))
    assert said == {"argv": ["toy", "DIR", "a b", "c"], "name": "__main__", "said": "first"}
    [path] = kept(tmp_path)
    assert path.read_text() == source("first") and path.stat().st_mode & 0o077 == 0
    [compiled] = (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc")  # the node's Python's own
    before = compiled.stat().st_mtime_ns
    assert answer(run(tmp_path, source("first")))["said"] == "first"
    assert compiled.stat().st_mtime_ns == before  # not compiled again


def test_another_source_is_kept_beside_and_runs_as_sent(tmp_path: Path) -> None:
    answer(run(tmp_path, source("first")))
    assert answer(run(tmp_path, source("other")))["said"] == "other"
    assert answer(run(tmp_path, source("first")))["said"] == "first"
    assert len(kept(tmp_path)) == 2


def test_a_kept_file_that_is_not_what_was_sent_is_never_run(tmp_path: Path) -> None:
    """Changed on the node (same size, its time put back): what was sent runs, and is kept again."""
    answer(run(tmp_path, source("right")))
    [path] = kept(tmp_path)
    stat = path.stat()
    path.write_text(source("wrong"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert answer(run(tmp_path, source("right")))["said"] == "right"
    assert path.read_text() == source("right")


def test_where_nothing_can_be_kept_the_script_runs_as_sent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("a file, not a directory: nothing can be written under it")
    assert answer(run(home, source("anyway"), "x"))["argv"] == ["toy", "DIR", "x"]


def test_calls_starting_at_once_in_a_fresh_home_all_run(tmp_path: Path) -> None:
    """Nodes sharing a home, or calls side by side on one node: each keeps the file itself."""
    call = remote.script("toy", "DIR")
    text = loader_line() + source("same") + "".join(f"V{i} = {i}\n" for i in range(20000))
    procs = [
        subprocess.Popen(
            call.command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        for _ in range(8)
    ]
    outs = [p.communicate(text, timeout=HANG) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [err for _, err in outs]
    assert all(json.loads(out.splitlines()[-1])["said"] == "same" for out, _ in outs)
    assert len(kept(tmp_path)) == 1 and not list(kept(tmp_path)[0].parent.glob("*.tmp"))


def test_versions_of_a_script_kept_over_a_week_ago_go_when_another_is_kept(tmp_path: Path) -> None:
    """A launcher upgrade keeps a new version of each script: the week-old ones go, bytecode too;
    one of them run again is simply kept again."""
    answer(run(tmp_path, source("old")))
    answer(run(tmp_path, source("recent")))
    old, recent = sorted(kept(tmp_path), key=lambda p: p.read_text() != source("old"))
    week_ago = time.time() - 8 * 24 * 3600
    os.utime(old, (week_ago, week_ago))
    os.utime(recent, (week_ago + 2 * 24 * 3600,) * 2)  # six days: kept
    answer(run(tmp_path, source("new")))
    assert {p.read_text() for p in kept(tmp_path)} == {source("recent"), source("new")}
    assert not list((old.parent / "__pycache__").glob(f"{old.stem}.*.pyc"))
    assert answer(run(tmp_path, source("old")))["said"] == "old"
    assert len(kept(tmp_path)) == 3


def test_which_finds_what_shutil_which_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Node scripts look programs up with common.which (shutil costs their start): as shutil does."""
    import shutil

    from launcher.node.scripts.common import which

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
