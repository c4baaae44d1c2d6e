"""py-spy reads a process with the least right that works: itself for this user's own processes
(where ptrace_scope allows it), `sudo -n <py-spy's absolute path> dump` for any other, never a
test of `sudo -n true`; a refusal is the evidence's answer, not a crash. (The real py-spy reading a
fake vLLM, as root: tests/test_supervise.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.node.scripts import stacks
from tests.conftest import ROOT

ME = os.geteuid() + 4242  # the node user these tests play: neither root nor the owner of tmp_path
FAKE_PY_SPY = """#!/bin/sh
echo "py-spy $*" >> "$CALLS"
echo "Thread 7 (idle): MainThread"
echo "    serve (vllm_api.py:42)"
"""
# A sudo that runs only `-n -- COMMAND` and only when $SUDO_ALLOWS is 1, as a sudoers line with
# NOPASSWD for py-spy's dump would; it says no as the real one does.
FAKE_SUDO = """#!/bin/sh
echo "sudo $*" >> "$CALLS"
if [ "$SUDO_ALLOWS" != 1 ]; then echo "sudo: a password is required" >&2; exit 1; fi
[ "$1" = -n ] || exit 9
shift
if [ "$1" = -l ]; then shift; shift; echo "$*"; exit 0; fi
[ "$1" = -- ] || exit 9
shift
exec "$@"
"""


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A node whose PATH holds a root-owned py-spy and sudo (fakes that log their calls), seen as
    user ME; the calls' log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(mode=0o755)
    for name, text in (("py-spy", FAKE_PY_SPY), ("sudo", FAKE_SUDO)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    calls.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("CALLS", str(calls))
    monkeypatch.setenv("SUDO_ALLOWS", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(stacks, "SYSTEM", ())
    monkeypatch.setattr(stacks.os, "geteuid", lambda: ME)
    return calls


@pytest.fixture
def pid() -> Iterator[int]:
    """A live Python process to read."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


def owned_by(monkeypatch: pytest.MonkeyPatch, uid: int) -> None:
    monkeypatch.setattr(stacks, "owner", lambda pid: uid)


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines()


@pytest.mark.parametrize(
    ("scope", "euid", "uid", "alone"),
    [
        (None, 1000, 1000, True),  # no Yama: the classic rule
        ("0", 1000, 1000, True),
        ("0", 1000, 0, False),  # root's process (a container's): never without help
        ("1", 1000, 1000, False),  # py-spy is not vLLM's parent
        ("2", 1000, 1000, False),
        ("1", 0, 1000, True),  # root reads any
        ("2", 0, 1000, True),
        ("3", 0, 0, False),  # nobody, root included
    ],
)
def test_py_spy_reads_a_process_alone_only_where_ptrace_scope_lets_this_user(
    scope: str | None, euid: int, uid: int, alone: bool
) -> None:
    assert stacks.direct(scope, euid, uid) is alone


def test_a_process_of_this_user_is_read_by_py_spy_itself(
    node: Path, pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    owned_by(monkeypatch, ME)
    found = stacks.dump_one(pid, "0", None)
    assert found["ok"] and found["paused"] and not found["sudo"], found
    assert calls(node) == [f"py-spy dump --pid {pid}"]  # no sudo asked, not even to test it


@pytest.mark.parametrize("scope", ["0", "1", "2"])
def test_a_process_py_spy_may_not_read_alone_is_read_through_sudo_n_py_spy_dump(
    node: Path, pid: int, monkeypatch: pytest.MonkeyPatch, scope: str
) -> None:
    owned_by(monkeypatch, 0 if scope == "0" else ME)  # root's (a container), or ours under 1 and 2
    found = stacks.dump_one(pid, scope, None)
    py_spy = str(node.parent / "bin" / "py-spy")
    assert found["ok"] and found["sudo"], found
    assert calls(node) == [f"sudo -n -- {py_spy} dump --pid {pid}", f"py-spy dump --pid {pid}"]
    assert "(paused, through sudo -n)" in stacks.stacks_text([found], "wedged")


def test_a_refused_sudo_is_said_in_the_evidence_and_not_tried_again(
    node: Path, pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    owned_by(monkeypatch, 0)
    monkeypatch.setenv("SUDO_ALLOWS", "0")
    found = stacks.dump_one(pid, "1", None)
    assert not found["ok"] and "stacks" not in found
    assert found["error"].startswith(f"sudo -n refused {node.parent / 'bin' / 'py-spy'}: ")
    assert "a password is required" in found["error"] and "deploy/upgrading-safely.md" in found["error"]
    assert len(calls(node)) == 1  # not again with --nonblocking
    assert f"## pid {pid} (FAILED: sudo -n refused" in stacks.stacks_text([found], "rank died")


def test_no_sudo_for_a_py_spy_this_user_can_change(
    node: Path, pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sudo rule for a py-spy in the user's venv would make the user root: it is never used."""
    (node.parent / "bin").chmod(0o775)  # its group may replace it
    owned_by(monkeypatch, 0)
    found = stacks.dump_one(pid, "0", None)
    assert not found["ok"] and "no py-spy here is root's alone" in found["error"], found
    assert calls(node) == []


def test_under_ptrace_scope_3_nothing_is_tried(node: Path, pid: int, monkeypatch: pytest.MonkeyPatch) -> None:
    owned_by(monkeypatch, ME)
    found = stacks.dump_one(pid, "3", None)
    assert not found["ok"] and found["error"].startswith("ptrace_scope=3: none: no process may be read")
    assert calls(node) == []


def test_check_asks_sudo_for_exactly_py_spys_dump_never_sudo_true(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stacks, "ptrace_scope", lambda: "1")
    py_spy = node.parent / "bin" / "py-spy"
    facts = stacks.tool_facts(None)
    assert facts["ptrace_ok"] and facts["py_spy"] == str(py_spy), facts
    assert facts["ptrace"] == f"ptrace_scope=1: through sudo -n {py_spy}"
    assert calls(node) == [f"sudo -n -l -- {py_spy} dump --pid 1"]  # the policy asked, nothing run
    monkeypatch.setenv("SUDO_ALLOWS", "0")
    refused = stacks.tool_facts(None)
    assert not refused["ptrace_ok"], refused
    assert refused["ptrace"].startswith("ptrace_scope=1 (restricted: a process may read only its own")
    assert (
        f"): no sudo rule for {py_spy} (" in refused["ptrace"] and "upgrading-safely.md" in refused["ptrace"]
    )


def test_check_reports_own_processes_under_ptrace_scope_0_without_asking_sudo_to_run_anything(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stacks, "ptrace_scope", lambda: "0")
    monkeypatch.setenv("SUDO_ALLOWS", "0")
    facts = stacks.tool_facts(None)
    py_spy = node.parent / "bin" / "py-spy"
    assert facts["ptrace_ok"], facts
    assert (
        facts["ptrace"]
        == f"ptrace_scope=0: own processes directly, others (a container's): no sudo rule for {py_spy}"
    )
    assert not [c for c in calls(node) if "true" in c.split()]


def test_check_warns_of_a_py_spy_carrying_a_file_capability(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`setcap cap_sys_ptrace+ep` lets every user who can run py-spy read every process."""
    monkeypatch.setattr(stacks, "file_capability", lambda path: True)
    facts = stacks.tool_facts(None)
    assert not facts["ptrace_ok"] and "carries a file capability (setcap)" in facts["ptrace"]
    assert "sudo setcap -r " in facts["ptrace"]


def test_the_documented_sudoers_line_allows_the_dumps_the_script_runs_and_nothing_else() -> None:
    line = re.compile(r"spark ALL=\(root\) NOPASSWD: (/\S+) \^(.+)\$")
    documents = [ROOT / "SECURITY.md", ROOT / "deploy" / "upgrading-safely.md"]
    found = {d.name: line.search(d.read_text().replace("\\$", "$")) for d in documents}
    assert all(found.values()) and len({m[0] for m in found.values() if m}) == 1, found
    match = found["SECURITY.md"]
    assert match is not None and match[1] == "/usr/local/bin/py-spy" and match[1] in stacks.SYSTEM
    arguments = re.compile(match[2])  # sudo reads it as a POSIX extended regular expression
    assert arguments.fullmatch("dump --pid 4242") and arguments.fullmatch("dump --pid 4242 --nonblocking")
    for other in ("dump --pid 1 --locals", "record --pid 1 -o /tmp/x", "dump --pid 1; id", "dump --pid"):
        assert not arguments.fullmatch(other), other


def test_no_document_advises_a_file_capability_for_py_spy() -> None:
    """Each mention of `setcap cap_sys_ptrace` is in a sentence that says never."""
    for path in [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "deploy").glob("*.md"))]:
        text = path.read_text()
        for mention in re.finditer(r"setcap\s+cap_sys_ptrace", text):
            sentence = text[: mention.start()].rsplit(". ", 1)[-1]
            assert re.search(r"\bnever\b", sentence, re.IGNORECASE), f"{path.name}: {sentence[-200:]}"
    assert "setcap" not in stacks.__doc__ + " ".join(stacks.SCOPES.values())
