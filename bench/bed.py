"""What the benchmarks that need the test bed share: the bed's session lock, engines, the CLI."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BED = Path("/tmp/spark-launch-testbed")
SESSION_LOCK = Path("/tmp/spark-launch-testbed.session.lock")  # what the e2e tests hold too


@contextlib.contextmanager
def bed_with_engines() -> Iterator[float]:
    """Hold the bed (waiting for any test session), with a Docker engine per node; yields the
    seconds `testbed up --docker` took (image build and loads included when not cached)."""
    with SESSION_LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "testbed", "up", "--docker"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"testbed up --docker failed:\n{done.stderr}")
        print(*[line for line in done.stderr.splitlines() if "test image" in line], file=sys.stderr)
        yield time.perf_counter() - began


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real spark-launch in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "launcher", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def engine(node: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The docker CLI against a bed node's own engine."""
    host = f"unix:///run/spark-launch-testbed/{node}/docker.sock"
    return subprocess.run(["docker", "-H", host, *args], capture_output=True, text=True, check=True)
