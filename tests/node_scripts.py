"""Running a node script here as a node runs it: from the unit kept in a home of the test's own,
through the stub (`python3 -S -c RUN_STUB UNIT NAME ARGS...`), with HOME (and the current
directory, as an SSH command's) there."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from launcher.core.stubs import RUN_STUB, UNIT_HOME
from launcher.node.unit import unit_bytes, unit_sha

HANG = 60  # seconds: a walk that reads a FIFO or /dev/zero never ends; this ends the test instead


def keep_unit(home: Path) -> Path:
    """The unit kept in `home` as the install script keeps it on a node (a node used before)."""
    path = home / UNIT_HOME / f"{unit_sha()}.pyz"
    if not path.is_file():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_bytes(unit_bytes())
    return path


def script_argv(name: str, *args: str, python: str = "python3", site: bool = False) -> list[str]:
    """The argv a node runs script `name` with (its venv's python with `site`, as the probe runs)."""
    return [python, *([] if site else ["-S"]), "-c", RUN_STUB, unit_sha(), name, *args]


def run_script(
    home: Path,
    name: str,
    *args: str,
    stdin: str = "",
    python: str = "python3",
    site: bool = False,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Script `name` run with `args` from the unit kept in `home`; its output."""
    keep_unit(home)
    return subprocess.run(
        script_argv(name, *args, python=python, site=site),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=check,
        cwd=home,
        env={**os.environ, **(env or {}), "HOME": str(home)},
    )


def run_in_unit(home: Path, code: str, env: dict[str, str] | None = None) -> str:
    """`code` run by `python3 -S` with the unit kept in `home` first on its import path, as the
    stub puts it (its modules are `spark_node.NAME`); what it prints."""
    unit = keep_unit(home)
    done = subprocess.run(
        ["python3", "-S", "-c", f"import sys; sys.path.insert(0, {str(unit)!r})\n{code}"],
        capture_output=True,
        text=True,
        timeout=HANG,
        check=True,
        cwd=home,
        env={**(env if env is not None else os.environ), "HOME": str(home)},
    )
    return done.stdout


def answer_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """A script's answer: its last JSON line."""
    said: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return said


def prepare(tmp_path: Path, path: Path, remove: list[str]) -> dict[str, Any]:
    """The prepare script's answer for model `path` with `remove` listed (its job file taken)."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"path": str(path), "remove": remove}))
    answer = answer_of(run_script(tmp_path / "home", "prepare", str(tmp_path), str(job)))
    assert not job.exists()  # the job file is taken
    return answer
