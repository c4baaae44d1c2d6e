"""The real two-node test bed for end-to-end tests, and a way to run the real CLI on it."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

BED = Path("/tmp/spark-launch-testbed")
DEMO = ROOT / "configs" / "demo.yaml"
NAMESPACES = {"node1": "sl-node1", "node2": "sl-node2"}


SESSION_LOCK = Path("/tmp/spark-launch-testbed.session.lock")


@pytest.fixture(scope="session")
def testbed() -> Iterator[Path]:
    """The two namespace nodes with sshd, the vLLM CPU venv and the tiny model (needs root).

    One test session at a time holds the bed (its names and addresses are machine-wide):
    a second session waits here until the first ends.
    """
    if os.geteuid() != 0:
        pytest.fail("the end-to-end tests need root (network namespaces, sshd)", pytrace=False)
    with SESSION_LOCK.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"\nwaiting for another test session to release the test bed ({SESSION_LOCK})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield _bring_up()


def _bring_up() -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", "up"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr
    return BED


def spec_file(directory: Path, name: str = "demo.yaml", base: Path = DEMO, **changes: Any) -> Path:
    """The demo spec (or `base`) with top-level sections replaced or nodes edited: nodes={1: {...}}."""
    data = yaml.safe_load(base.read_text())
    for key, value in changes.items():
        if key == "nodes":
            for index, fields in value.items():
                data["nodes"][index].update(fields)
        elif isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the real `spark-launch` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "launcher", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def start_cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start the real `spark-launch` and return at once (stderr line-buffered for progress)."""
    return subprocess.Popen(
        [sys.executable, "-m", "launcher", *map(str, args)],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def wait_for_line(proc: subprocess.Popen[str], words: str, timeout: float = 180) -> list[str]:
    """Read proc's stderr until a line contains `words`; the lines read."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if words in line:
            return seen
    raise AssertionError(f"never saw {words!r}; saw:\n{''.join(seen)}")


def marked_processes(cluster: str = "demo") -> list[int]:
    """Pids of live processes carrying spark-launch's marker for `cluster` (any node)."""
    pids = []
    needle = f"SPARK_LAUNCH_RUN={cluster}/".encode()
    for entry in Path("/proc").iterdir():
        try:
            if (
                needle in (entry / "environ").read_bytes()
                and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                pids.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


@pytest.fixture
def clean_demo(testbed: Path) -> Iterator[None]:
    """No demo cluster before the test, and none left after it."""
    cli("down", DEMO, "--grace", "5")
    yield
    cli("down", DEMO, "--grace", "5")
    assert marked_processes() == []
