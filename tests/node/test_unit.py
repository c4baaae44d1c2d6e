"""The node code as one versioned unit: built the same every time, kept on a node once per version,
hashed before every use, and refused (never run) when it is not the one a call names.

Run here as a node runs it: a home of the test's own, the agent over the local executor, the
stubs in real `python3 -S` processes.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from launcher.core import remote
from launcher.core.stubs import CARRY_STUB, RUN_STUB, UNIT_HOME, UNIT_MISSING, UNIT_PACKAGE
from launcher.node import unit
from launcher.node.agent import Agent, stdin_of
from launcher.node.executor import NodeError, Result
from launcher.node.scripts import install
from launcher.node.unit import unit_bytes, unit_line, unit_sha
from tests.fakes.local import LocalExecutor
from tests.node_scripts import HANG, answer_of, keep_unit, run_script, script_argv

ALL_MODULES = sorted(p.stem for p in unit.SCRIPTS.glob("*.py"))


class Recording(LocalExecutor):
    """The local executor, each command's script name (or "shell") and exit status kept."""

    def __init__(self, home: Path, kept: bool = False) -> None:
        super().__init__(home, kept=kept)
        self.said: list[tuple[str, int]] = []

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        """Run it, and note what ran and how it ended."""
        result = super().run(node, command, stdin, timeout)
        words = shlex.split(command)
        name = words[5] if words[:3] == ["python3", "-S", "-c"] and len(words) > 5 else "shell"
        self.said.append((name, result.exited))
        return result


def kept_path(home: Path) -> Path:
    return home / UNIT_HOME / f"{unit_sha()}.pyz"


def forged_unit(marker: Path) -> bytes:
    """A unit whose every script writes `marker`: what a planted file would run."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in ALL_MODULES:
            archive.writestr(f"{UNIT_PACKAGE}/{name}.py", f"open({str(marker)!r}, 'w').write('ran')\n")
    return buffer.getvalue()


# -- the build --------------------------------------------------------------------------------
def test_the_unit_is_built_byte_for_byte_the_same_whatever_the_files_times_and_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "scripts"
    shutil.copytree(unit.SCRIPTS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in copy.iterdir():
        os.utime(path, (1e9, 1e9))
        path.chmod(0o600)
    monkeypatch.setattr(unit, "SCRIPTS", copy)
    old = os.umask(0o077)
    try:
        again = unit.unit_bytes.__wrapped__()
    finally:
        os.umask(old)
    assert again == unit_bytes() == unit.unit_bytes.__wrapped__()
    assert unit_sha() == hashlib.sha256(unit_bytes()).hexdigest()


def test_the_unit_holds_the_package_and_its_entry_sorted_stored_with_fixed_times_and_modes() -> None:
    with zipfile.ZipFile(io.BytesIO(unit_bytes())) as archive:
        infos = archive.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names) and "__main__.py" in names
    assert set(names) - {"__main__.py"} == {f"{UNIT_PACKAGE}/{m}.py" for m in ALL_MODULES}
    assert {(i.date_time, i.compress_type, i.external_attr >> 16) for i in infos} == {
        ((1980, 1, 1, 0, 0, 0), zipfile.ZIP_STORED, 0o100644)
    }
    assert not [n for n in names if n.endswith(".pyc")]  # no bytecode travels: each node compiles


def test_every_module_of_the_unit_and_the_stubs_parse_as_python_3_8() -> None:
    """Nodes' python3 may be old: no syntax newer than 3.8, in what runs there."""
    with zipfile.ZipFile(io.BytesIO(unit_bytes())) as archive:
        for name in archive.namelist():
            ast.parse(archive.read(name), name, feature_version=(3, 8))
    for stub in (RUN_STUB, CARRY_STUB):
        ast.parse(stub, feature_version=(3, 8))


def test_the_unit_runs_as_a_zip_application(tmp_path: Path) -> None:
    """`python3 UNIT SCRIPT ARGS...` runs that script (rsync's remote shell in a relayed copy)."""
    path = tmp_path / "unit.pyz"
    path.write_bytes(unit_bytes())
    done = subprocess.run(
        ["python3", "-S", str(path), "rank_status", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=True,
        timeout=HANG,
    )
    assert answer_of(done) == {"ok": True, "state": None, "alive": False, "processes": 0}


def test_a_scripts_tag_changes_with_what_it_imports_and_only_that(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = unit.tag("probe")
    assert probe == unit.tag("probe") and len(probe) == 16
    copy = tmp_path / "scripts"
    shutil.copytree(unit.SCRIPTS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(unit, "SCRIPTS", copy)
    fresh = unit.tag.__wrapped__  # not the cached answer of the shipped sources
    assert fresh("probe") == probe  # the same sources, elsewhere
    with (copy / "stop.py").open("a") as stop:  # a module the probe does not import
        stop.write("\n# changed\n")
    assert fresh("probe") == probe
    with (copy / "common.py").open("a") as common:  # one it imports
        common.write("\n# changed\n")
    assert fresh("probe") != probe
    assert unit._reached("probe", set()) == {"probe", "inputs", "installed", "common"}
    assert "stop" not in unit._reached("check_facts", set())


# -- a call on a node --------------------------------------------------------------------------
def test_a_call_on_a_fresh_node_sends_the_unit_then_runs_and_the_next_call_runs_at_once(
    tmp_path: Path,
) -> None:
    executor = Recording(tmp_path)
    agent = Agent(executor, "c", "n1")
    assert agent.status().alive is False
    assert executor.said == [("rank_status", UNIT_MISSING), ("install", 0), ("rank_status", 0)]
    assert kept_path(tmp_path).read_bytes() == unit_bytes()
    folder = kept_path(tmp_path).parent
    assert (folder.stat().st_mode & 0o777, folder.parent.stat().st_mode & 0o777) == (0o700, 0o700)
    assert kept_path(tmp_path).stat().st_mode & 0o777 == 0o600
    executor.said.clear()
    Agent(executor, "c", "n1").status()  # another launcher process: the unit is there
    assert executor.said == [("rank_status", 0)]


def test_a_planted_unit_under_the_calls_name_is_refused_replaced_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "the-planted-unit-ran"
    kept_path(tmp_path).parent.mkdir(parents=True, mode=0o700)
    kept_path(tmp_path).write_bytes(forged_unit(marker))
    executor = Recording(tmp_path)
    assert Agent(executor, "c", "n1").status().alive is False
    assert not marker.exists()
    assert executor.said == [("rank_status", UNIT_MISSING), ("install", 0), ("rank_status", 0)]
    assert kept_path(tmp_path).read_bytes() == unit_bytes()


def test_a_unit_sent_yet_not_found_by_the_next_call_is_an_error_naming_the_node(tmp_path: Path) -> None:
    """A node whose SSH commands see another home than the install did: said, not looped on."""

    class TwoHomes(Recording):
        def run(
            self, node: str, command: str, stdin: str | None = None, timeout: float | None = None
        ) -> Result:
            self.home = tmp_path / ("other" if " install" in command else "home")
            self.home.mkdir(exist_ok=True)
            return super().run(node, command, stdin, timeout)

    executor = TwoHomes(tmp_path / "home")
    with pytest.raises(NodeError) as caught:
        Agent(executor, "c", "n1").status()
    assert caught.value.message.startswith(
        f"node n1: the node script rank_status found no unit {unit_sha()[:16]}"
    )
    assert executor.said == [("rank_status", UNIT_MISSING), ("install", 0), ("rank_status", UNIT_MISSING)]


def test_the_stub_runs_nothing_of_a_unit_that_is_not_the_one_named(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    keep_unit(tmp_path).write_bytes(forged_unit(marker))  # changed in place, same name
    done = run_script(tmp_path, "rank_status", str(tmp_path / "run"), check=False)
    assert (done.returncode, done.stdout) == (UNIT_MISSING, "")
    assert done.stderr == f"spark-launch: no unit {unit_sha()}\n" and not marker.exists()


def test_bytecode_planted_beside_the_unit_or_in_the_home_is_never_used(tmp_path: Path) -> None:
    """A .pyc kept beside the unit (where the old loader kept its bytecode), or a package and a
    standard-library name planted in the home, where SSH commands start: none runs."""
    marker = tmp_path / "ran"
    evil = f"open({str(marker)!r}, 'w').write('ran')\n"
    folder = keep_unit(tmp_path).parent
    for place in (folder, tmp_path):  # the unit's folder, and the home (the current directory)
        (place / UNIT_PACKAGE).mkdir()
        for name in ("__init__", "rank_status", "common", "json", "hashlib", "runpy"):
            source = place / UNIT_PACKAGE / f"{name}.py"
            source.write_text(evil)
            (place / f"{name}.py").write_text(evil)
        subprocess.run(["python3", "-m", "compileall", "-q", str(place)], check=True)
        for pyc in place.rglob("*.pyc"):  # bytecode beside the sources, as Python itself would find it
            shutil.copy(pyc, pyc.parent.parent / (pyc.name.split(".")[0] + ".pyc"))
    done = run_script(tmp_path, "rank_status", str(tmp_path / "run"))
    assert answer_of(done)["ok"] and not marker.exists()


# -- keeping it --------------------------------------------------------------------------------
def install_here(
    home: Path, python: str = "python3", sent: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The install call as the agent sends it, run here (`sent`: what arrives on its stdin, else
    the unit as the agent sends it)."""
    call = remote.unit_call().bound(unit_sha())
    return subprocess.run(
        call.command.replace("python3", python, 1),
        shell=True,
        input=stdin_of(call) if sent is None else sent,
        capture_output=True,
        text=True,
        check=False,
        timeout=HANG,
        cwd=home,
        env={**os.environ, "HOME": str(home)},
    )


def test_a_unit_damaged_on_the_way_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    damaged = unit_line()[:1000] + ("A" if unit_line()[1000] != "A" else "B") + unit_line()[1001:]
    done = install_here(tmp_path, sent=damaged)
    assert done.returncode == 1 and done.stderr == f"spark-launch: the unit sent is not {unit_sha()}\n"
    assert not (tmp_path / ".spark-launch").exists()


@pytest.mark.parametrize("how", ["link", "writable by others", "another owner"])
def test_a_folder_that_is_not_the_users_own_is_never_written_and_the_calls_carry_the_unit(
    tmp_path: Path, how: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    home = tmp_path / "home"
    (home / ".spark-launch").mkdir(parents=True, mode=0o700)
    folder = home / UNIT_HOME
    if how == "link":
        folder.symlink_to(elsewhere)
    else:
        folder.mkdir(mode=0o700)
        if how == "writable by others":
            folder.chmod(0o777)
        elif os.geteuid() != 0:
            pytest.skip("giving a folder to another user takes root")
        else:
            os.chown(folder, 65534, 65534)
    assert answer_of(install_here(home)) == {
        "ok": False,
        "error": "~/.spark-launch/agent is not a folder of this user's only",
    }
    executor = Recording(home)
    agent = Agent(executor, "c", "n1")
    assert agent.status().alive is False and agent.carry  # it still answers: the unit came with it
    assert executor.said == [("rank_status", UNIT_MISSING), ("install", 0), ("rank_status", 0)]
    assert list(elsewhere.iterdir()) == [] and not list(folder.glob("*.pyz"))


def test_the_copy_is_written_under_an_unguessable_name_created_exclusively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary name has 128 random bits; one taken already (a link planted there, say) is
    never opened: the write fails, the link's target untouched."""
    names = set()
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: names.add(Path(a).name) or real_replace(a, b))
    for i in range(3):
        install.write(str(tmp_path / f"u{i}"), b"unit")
    assert len(names) == 3 and all(len(n) == 1 + 32 + 4 and n.startswith(".") for n in names)
    victim = tmp_path / "victim"
    victim.write_text("mine")
    monkeypatch.setattr(os, "urandom", lambda n: b"\x01" * n)
    (tmp_path / f".{'01' * 16}.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        install.write(str(tmp_path / "u"), b"unit")
    assert victim.read_text() == "mine" and not (tmp_path / "u").exists()


def test_units_of_other_versions_kept_over_a_week_ago_go_when_a_new_one_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / UNIT_HOME
    folder.mkdir(parents=True, mode=0o700)
    old, recent, other = folder / f"{'a' * 64}.pyz", folder / f"{'b' * 64}.pyz", folder / "notes.txt"
    left = folder / f".{'c' * 32}.tmp"
    for path in (old, recent, other, left):
        path.write_bytes(b"x")
    week_ago = time.time() - 8 * 24 * 3600
    for path in (old, other, left):
        os.utime(path, (week_ago, week_ago))
    os.utime(recent, (time.time() - 6 * 24 * 3600,) * 2)
    said = answer_of(install_here(tmp_path))
    assert said == {"ok": True, "unit": unit_sha(), "removed": [old.name]}
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [recent.name, other.name, kept_path(tmp_path).name]
    )


def test_installs_at_once_in_one_home_all_succeed(tmp_path: Path) -> None:
    """Nodes sharing a home, or calls side by side on one node: each puts the whole unit in place."""
    call = remote.unit_call().bound(unit_sha())
    procs = [
        subprocess.Popen(
            call.command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        for _ in range(8)
    ]
    outs = [p.communicate(stdin_of(call), timeout=HANG) for p in procs]
    assert [json.loads(out)["ok"] for out, _ in outs] == [True] * 8, [err for _, err in outs]
    assert [p.name for p in kept_path(tmp_path).parent.iterdir()] == [kept_path(tmp_path).name]
    assert kept_path(tmp_path).read_bytes() == unit_bytes()


def test_a_carried_unit_leaves_nothing_behind(tmp_path: Path) -> None:
    """As in a container: the unit on stdin, kept for the process only."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = [*script_argv("rank_status", str(tmp_path / "run"))]
    argv[argv.index(RUN_STUB)] = CARRY_STUB
    done = subprocess.run(
        argv,
        input=unit_line(),
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp)},
    )
    assert answer_of(done)["ok"] and list(tmp.iterdir()) == []


def test_the_oldest_python3_a_node_may_have_keeps_and_runs_the_unit(tmp_path: Path) -> None:
    """3.8, where this machine has it (pyenv): zipimport, runpy and the install script there."""
    found = [*Path("~/.pyenv/versions").expanduser().glob("3.8*/bin/python3"), shutil.which("python3.8")]
    works = [str(p) for p in found if p and subprocess.run([str(p), "-c", ""], check=False).returncode == 0]
    if not works:
        pytest.skip("no python3.8 here")
    python = works[0]
    assert answer_of(install_here(tmp_path, python))["ok"]
    done = run_script(tmp_path, "rank_status", str(tmp_path / "run"), python=python)
    assert answer_of(done)["ok"]
