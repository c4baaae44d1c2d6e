"""The real two-node test bed for end-to-end tests, and a way to run the real CLI on it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import leftovers
from tests.conftest import ROOT

BED = Path("/tmp/spark-launch-testbed")
DEMO = ROOT / "configs" / "demo.yaml"
NAMESPACES = {"node1": "sl-node1", "node2": "sl-node2"}


SESSION_LOCK = Path("/tmp/spark-launch-testbed.session.lock")
# pytest's timeout (pyproject: 1800 s a test, its fixtures' setup included) must outlast every
# wait a fixture bounds itself, or a slow first run dies with no word of why. The bed's first
# `up` and the engines' image build can fall in one test: together they stay under it.
BED_UP_SECONDS = 600
VENV_WAIT_SECONDS = 300  # within BED_UP_SECONDS: another session's venv build, if one runs
ENGINES_SECONDS = 1080  # a cold image: debootstrap, the layer, a load into each engine
RUN_ROOT = Path.home() / ".spark-launch"  # every bed node's run directories (one file system)
ENGINES = tuple(Path(f"/run/spark-launch-testbed/{node}/docker.sock") for node in NAMESPACES)


@pytest.fixture(scope="session")
def bed_lock() -> Iterator[None]:
    """This session holds the bed: one test session at a time (its names and addresses are
    machine-wide); a second session waits here until the first ends."""
    if os.geteuid() != 0:
        pytest.fail("the end-to-end tests need root (network namespaces, sshd)", pytrace=False)
    with SESSION_LOCK.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"\nwaiting for another test session to release the test bed ({SESSION_LOCK})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def testbed(bed_lock: None) -> Path:
    """The two namespace nodes with sshd, the vLLM CPU venv and the tiny model (needs root)."""
    return _bring_up()


def _bring_up() -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", "up", "--venv-wait", str(VENV_WAIT_SECONDS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=BED_UP_SECONDS,
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


def only(document: str) -> Any:
    """The one deployment of a command's `--json` document (every deployment is in a list)."""
    (deployment,) = json.loads(document)["deployments"]
    return deployment


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


def hold_port(namespace: str, port: int | str) -> subprocess.Popen[bytes]:
    """A plain HTTP server on `port` of a node (all its addresses), once it listens."""
    holder = subprocess.Popen(
        ["ip", "netns", "exec", namespace, "python3", "-m", "http.server", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = "10.99.0." + namespace.removeprefix("sl-node")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and holder.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection((address, int(port)), timeout=1):
            return holder
        time.sleep(0.05)
    holder.kill()
    raise AssertionError(f"nothing came to listen on {address}:{port}")


def marked_processes(cluster: str = "demo") -> list[int]:
    """Pids of live processes of `cluster` (or `cluster/node`) on any node, seen from outside:
    the run marker in their environment, their session, or their run directory (containers'
    processes too)."""
    return [p.pid for p in leftovers.of(cluster, RUN_ROOT, leftovers.processes(every_namespace=True))]


def down_if_running(spec: Path = DEMO, cluster: str = "demo") -> None:
    """`down` the spec's cluster when anything of it runs (a `down` of nothing costs a CLI run)."""
    if marked_processes(cluster):
        cli("down", spec, "--grace", "5")


@pytest.fixture
def clean_demo(testbed: Path) -> Iterator[None]:
    """No demo cluster before the test, and none left after it."""
    down_if_running()
    yield
    down_if_running()
    assert marked_processes() == []


def bed_clusters() -> set[str]:
    """The clusters that ever ran on the bed (each has a directory in the run root)."""
    return {p.name for p in RUN_ROOT.iterdir() if p.is_dir()} if RUN_ROOT.is_dir() else set()


def running_on_bed() -> set[str]:
    """The bed's clusters with a process or a container running now."""
    seen = leftovers.processes()
    named = {c for c in bed_clusters() if leftovers.of(c, RUN_ROOT, seen)}
    return named | set(leftovers.containers(ENGINES))


def reap_bed(spared: set[str]) -> list[str]:
    """Kill every process and container of the bed's clusters but `spared`; what was found."""
    seen = leftovers.processes()
    live = [c for c in sorted(bed_clusters() - spared) if leftovers.of(c, RUN_ROOT, seen)]
    found = [f"{c}: {p}" for c in live for p in leftovers.reap(c, RUN_ROOT)]
    boxes = {c: ids for c, ids in leftovers.containers(ENGINES).items() if c not in spared}
    for cluster, ids in boxes.items():
        leftovers.remove(ids)
        found += [f"{cluster}: container {cid} on {sock}" for sock, cid in ids]
    return found


@contextlib.contextmanager
def leaks_fail(what: str) -> Iterator[None]:
    """Whatever a bed cluster that was not running on entry leaves running is killed, and fails."""
    before = running_on_bed()
    yield
    left = reap_bed(spared=before)
    if left:
        pytest.fail(f"{what} left these running (killed now):\n  " + "\n  ".join(left), pytrace=False)


@pytest.fixture(autouse=True)
def no_leftovers(bed_lock: None) -> Iterator[None]:
    """What a test's clusters leave running (seen from outside: marker, session, run directory,
    container label) is killed, and fails the test. Clusters already running when it began
    belong to a module's or the session's fixture: they are looked at when that one ends."""
    with leaks_fail("this test"):
        yield


@pytest.fixture(autouse=True, scope="module")
def no_leftovers_in_the_module(bed_lock: None) -> Iterator[None]:
    """The same for the module's own fixtures (a pair shared by its tests, say)."""
    with leaks_fail("this module's fixtures"):
        yield


@pytest.fixture(autouse=True, scope="session")
def no_leftovers_in_the_session(bed_lock: None) -> Iterator[None]:
    """The same for the session's fixtures (looked at while this session still holds the bed).
    What an earlier session left is killed first: holding the bed, nothing else runs on it."""
    earlier = reap_bed(spared=set())
    if earlier:
        print("\nkilled what an earlier test session left on the bed:\n  " + "\n  ".join(earlier))
    with leaks_fail("this session's fixtures"):
        yield
