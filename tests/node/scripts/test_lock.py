"""The cluster lock, through the real lock script on this machine: who holds it, when it is
stale, and that breaking a stale lock lets exactly one launcher in, however they race."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from launcher.core.plan import build_plan
from launcher.core.vllm.models import kind_facts
from launcher.load import catalog_for
from launcher.node.cluster import Cluster, ClusterBusy
from launcher.node.executor import NodeError, Result
from launcher.node.locking import holder_is_stale, process_start
from tests.conftest import ROOT, base_spec, spec_of
from tests.fakes.local import LocalExecutor

ROUNDS, RACERS = 10, 2


def cluster_at(home: Path, name: str, executor: LocalExecutor | None = None) -> Cluster:
    spec = spec_of({**base_spec(), "name": name})
    plan = build_plan(spec, kind_facts("hybrid", "test"), catalog_for(spec))
    return Cluster(spec, plan, executor or LocalExecutor(home))


def lock_dir(home: Path, name: str) -> Path:
    return home / ".spark-launch" / name / "lock"


def dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def plant(home: Path, name: str, holder: dict[str, Any]) -> None:
    """A lock as a launcher that died would leave it."""
    lock_dir(home, name).mkdir(parents=True)
    (lock_dir(home, name) / "holder.json").write_text(json.dumps(holder))


def stale_holder(token: str) -> dict[str, Any]:
    return {
        "token": token,
        "host": socket.gethostname(),
        "pid": dead_pid(),
        "started": "0:1",
        "command": "up",
    }


def test_a_lock_names_its_owner_and_is_released(tmp_path: Path) -> None:
    cluster = cluster_at(tmp_path, "t")
    with cluster.locked("up", "20260101-000000-abcd"):
        holder = json.loads((lock_dir(tmp_path, "t") / "holder.json").read_text())
    assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
    assert holder["started"] == process_start(os.getpid()) is not None
    assert holder["run_id"] == "20260101-000000-abcd" and holder["command"] == "up"
    assert not lock_dir(tmp_path, "t").exists()


def test_the_lock_taken_for_up_says_what_runs_and_its_release_keeps_the_receipt_first(tmp_path: Path) -> None:
    """`up`'s two calls to the head besides its start and its watch: no call of their own for
    what runs there, nor for the run's receipt."""
    cluster = cluster_at(tmp_path, "t")
    receipt = ".spark-launch/t/runs/20260101-000000-abcd.json"
    with cluster.locked("up", "20260101-000000-abcd", status=True) as hold:
        assert hold.state is not None and not hold.state.alive and hold.state.state is None
        hold.leave(receipt, '{"outcome": "served"}\n')
    kept = tmp_path / receipt
    assert kept.read_text() == '{"outcome": "served"}\n' and kept.stat().st_mode & 0o777 == 0o600
    assert kept.parent.stat().st_mode & 0o777 == 0o700
    assert not lock_dir(tmp_path, "t").exists()


def test_a_file_the_release_cannot_keep_never_keeps_the_lock_held(tmp_path: Path) -> None:
    cluster = cluster_at(tmp_path, "t")
    (tmp_path / ".spark-launch" / "t").mkdir(parents=True)
    (tmp_path / ".spark-launch" / "t" / "runs").write_text("a file where the folder goes")
    with cluster.locked("up", status=True) as hold:
        hold.leave(".spark-launch/t/runs/20260101-000000-abcd.json", "{}")
    assert not lock_dir(tmp_path, "t").exists()
    with cluster.locked("up", status=True) as hold:
        hold.leave("../outside.json", "{}")  # never written outside the home
    assert not (tmp_path.parent / "outside.json").exists() and not lock_dir(tmp_path, "t").exists()


def test_a_lock_is_stale_only_when_its_owner_is_provably_gone() -> None:
    here, me = socket.gethostname(), os.getpid()
    assert not holder_is_stale({"host": here, "pid": me, "started": process_start(me)})
    assert holder_is_stale({"host": here, "pid": me, "started": "another boot:12"})  # the pid was reused
    assert holder_is_stale({"host": here, "pid": dead_pid(), "started": "x"})
    assert not holder_is_stale({"host": "elsewhere", "pid": dead_pid()})  # cannot be seen from here
    assert not holder_is_stale({"host": here, "pid": me})  # an older lock: alive is all we know
    assert not holder_is_stale({"host": here, "pid": "1"}) and not holder_is_stale({})


def test_a_live_holder_keeps_its_lock(tmp_path: Path) -> None:
    holder = {"token": "t0", "host": socket.gethostname(), "pid": os.getppid(), "command": "up", "since": 0}
    holder["started"] = process_start(os.getppid())
    plant(tmp_path, "t", holder)
    with pytest.raises(ClusterBusy) as caught, cluster_at(tmp_path, "t").locked("up"):
        pass
    assert f"(pid {os.getppid()}) since" in caught.value.message
    assert json.loads((lock_dir(tmp_path, "t") / "holder.json").read_text())["token"] == "t0"


class LosesTheHead(LocalExecutor):
    """The head answers until the first release of the lock, which it never gets."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.lost = False

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        if " cluster_lock " in f" {command} " and " release " in command and not self.lost:
            self.lost = True
            raise NodeError(node, "connection lost")
        return super().run(node, command, stdin, timeout)


def test_a_lock_this_launcher_could_not_release_is_its_own_to_take_again(tmp_path: Path) -> None:
    """As `supervise` restarting a cluster whose head was lost while `up` held the lock: the lock
    names this very (live) process, and the next start takes it over instead of locking itself out."""
    cluster = cluster_at(tmp_path, "t", LosesTheHead(tmp_path))
    with cluster.locked("up"):
        pass
    assert lock_dir(tmp_path, "t").exists()  # left behind, naming this live process
    with cluster.locked("up"):
        token = json.loads((lock_dir(tmp_path, "t") / "holder.json").read_text())["token"]
    assert not lock_dir(tmp_path, "t").exists()
    other = cluster_at(tmp_path, "t")  # another launcher in this same process: not its lock
    plant(tmp_path, "t", {"token": token, "host": socket.gethostname(), "pid": os.getpid()})
    with pytest.raises(ClusterBusy), other.locked("up"):
        pass


def racer(home: str, name: str, rounds: int, folder: str) -> None:
    """One launcher: each round, at the signal, try to take the lock and hold it a moment."""
    cluster = cluster_at(Path(home), name)
    log = os.open(os.path.join(folder, "log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    holder = lock_dir(Path(home), name) / "holder.json"
    for r in range(rounds):
        while not os.path.exists(os.path.join(folder, f"go-{r}")):
            time.sleep(0.002)
        time.sleep(random.uniform(0, 0.3))  # a different interleaving each round
        try:
            with cluster.locked("race"):
                os.write(log, f"{r} enter {os.getpid()}\n".encode())
                time.sleep(0.2)
                still = holder.exists() and json.loads(holder.read_text())["pid"] == os.getpid()
                os.write(log, f"{r} {'exit' if still else 'broken'} {os.getpid()}\n".encode())
        except ClusterBusy:
            os.write(log, f"{r} busy {os.getpid()}\n".encode())
        Path(folder, f"done-{r}-{os.getpid()}").touch()


def test_launchers_racing_for_a_stale_lock_never_both_hold_it(tmp_path: Path) -> None:
    """RACERS real processes, ROUNDS times, each time all at once against a stale lock."""
    name = f"race-{os.getpid()}"
    argv = [
        sys.executable,
        "-m",
        "tests.node.scripts.test_lock",
        str(tmp_path),
        name,
        str(ROUNDS),
        str(tmp_path),
    ]
    procs = [subprocess.Popen(argv, cwd=ROOT) for _ in range(RACERS)]
    try:
        for r in range(ROUNDS):
            plant(tmp_path, name, stale_holder(f"stale-{r}"))
            (tmp_path / f"go-{r}").touch()
            while len(list(tmp_path.glob(f"done-{r}-*"))) < RACERS:
                assert all(p.poll() in (None, 0) for p in procs), "a racer died"
                time.sleep(0.01)
            assert not lock_dir(tmp_path, name).exists()  # whoever held it released it
    finally:
        for p in procs:
            p.kill()
            p.wait()
    events = [line.split() for line in (tmp_path / "log").read_text().splitlines()]
    for r in range(ROUNDS):
        inside = [what for n, what, _ in events if n == str(r) and what != "busy"]
        assert inside and inside == ["enter", "exit"] * (len(inside) // 2), f"round {r}: {inside}"


if __name__ == "__main__":
    racer(*sys.argv[1:3], int(sys.argv[3]), sys.argv[4])
