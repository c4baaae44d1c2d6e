"""`sync models` on the real test bed: real rsync between the nodes' sshd, real files.

A generated model (shards of random bytes plus their safetensors index, about 300 MB) is
on the head. node2 sees its own directory in place of the model's parent (a bind mount in
node2's mount namespace), so its copy is separate: missing, partial, one byte different,
too small, read-only. Each case is fixed (or refused before anything is copied) and
`check` agrees with the result.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.shards import write_sharded_model
from tests.conftest import ROOT
from tests.e2e.conftest import BED, cli, spec_file, start_cli

pytestmark = pytest.mark.testbed

PARENT = Path("/tmp/spark-launch-sync")  # the model's parent, as every node names it
MODEL = PARENT / "model"
NODE2 = Path("/tmp/spark-launch-sync-node2")  # what node2 sees at PARENT
SHARDS, SHARD_BYTES = 4, 75_000_000


def run_bed(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 or not check, done.stderr
    return done


@pytest.fixture(scope="module")
def model(testbed: Path) -> Iterator[list[str]]:
    """The model on the head (and the host): config, tokenizer, shards, index. Removed after."""
    shards = write_sharded_model(MODEL, BED / "model", SHARDS, SHARD_BYTES)
    yield shards
    shutil.rmtree(PARENT, ignore_errors=True)


@pytest.fixture
def node2(model: list[str]) -> Iterator[Path]:
    """node2's own, empty view of the model's parent; node2's copy lands in the returned dir."""
    shutil.rmtree(NODE2, ignore_errors=True)
    NODE2.mkdir()
    run_bed("bind", "node2", str(NODE2), str(PARENT))
    yield NODE2 / "model"
    run_bed("unbind", "node2", str(PARENT), check=False)  # gone already if sshd restarted
    shutil.rmtree(NODE2, ignore_errors=True)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    return spec_file(tmp_path, model={"path": str(MODEL)})


def sync(spec: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = cli("sync", "models", spec, "--json", *args, timeout=600)
    assert done.stdout.startswith("{"), done.stderr
    return done.returncode, json.loads(done.stdout)


def check(spec: Path) -> tuple[int, dict[str, dict[str, Any]]]:
    """check's exit code and its failing rows by item."""
    done = cli("check", spec, "--no-probe", "--json", timeout=600)
    rows = json.loads(done.stdout)["rows"]
    return done.returncode, {r["item"]: r for r in rows if not r["ok"] and r["level"] == "fail"}


def plan_of(result: dict[str, Any]) -> dict[str, Any]:
    [node] = result["nodes"]
    transfer: dict[str, Any] = node["dirs"][0]["transfer"]
    return {"state": node["state"], **transfer}


def same_files(copy: Path) -> bool:
    names = sorted(p.name for p in MODEL.iterdir() if not p.name.startswith("."))
    return names == sorted(p.name for p in copy.iterdir() if not p.name.startswith(".")) and all(
        (MODEL / n).read_bytes() == (copy / n).read_bytes() for n in names
    )


def test_a_node_without_the_model_gets_it_and_check_then_passes(spec: Path, node2: Path) -> None:
    code, bad = check(spec)
    assert code == 3 and f"{MODEL} exists" in bad
    code, planned = sync(spec, "--dry-run")
    assert code == 0 and plan_of(planned)["state"] == "would copy" and not node2.exists()
    assert len(plan_of(planned)["missing"]) == SHARDS + 4
    code, result = sync(spec)
    assert code == 0 and plan_of(result)["state"] == "copied"
    [copied] = result["nodes"]
    # Every file proven by rsync's own checksum of the source's hashed bytes: none read again.
    assert copied["proven_files"] == SHARDS + 4 and copied["hashed_bytes"] == 0
    assert same_files(node2)
    assert check(spec) == (0, {})


def test_a_partial_copy_is_completed(spec: Path, node2: Path, model: list[str]) -> None:
    node2.mkdir()
    for name in ("config.json", model[0]):
        shutil.copy2(MODEL / name, node2 / name)
    with (MODEL / model[1]).open("rb") as src, (node2 / model[1]).open("wb") as dst:
        dst.write(src.read(SHARD_BYTES // 3))  # a copy cut short
    code, result = sync(spec)
    planned = plan_of(result)
    assert code == 0 and planned["state"] == "copied"
    assert planned["resume"] == [model[1]] and planned["identical"] == 2
    assert planned["send_bytes"] < SHARDS * SHARD_BYTES - SHARD_BYTES
    assert same_files(node2) and check(spec) == (0, {})


def flip_one_byte_keeping_mtime(path: Path) -> None:
    before = path.stat()
    with path.open("r+b") as f:
        f.seek(SHARD_BYTES // 2)
        byte = f.read(1)
        f.seek(SHARD_BYTES // 2)
        f.write(bytes([byte[0] ^ 0x01]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_same_size_shard_with_one_byte_changed_fails_check_and_is_fixed(
    spec: Path, node2: Path, model: list[str]
) -> None:
    shutil.copytree(MODEL, node2, ignore=shutil.ignore_patterns(".*"))
    assert check(spec) == (0, {})  # the copies agree (and each node's manifest is cached now)
    flip_one_byte_keeping_mtime(node2 / model[2])
    code, bad = check(spec)
    assert code == 3 and list(bad) == [model[2]]
    sizes = {v.split(" ", 1)[1] for v in bad[model[2]]["values"].values()}
    assert len(sizes) == 1  # the same size on both nodes: only the content tells them apart
    code, result = sync(spec)
    planned = plan_of(result)
    assert code == 0 and planned["replace"] == [model[2]] and planned["missing"] == []
    assert same_files(node2) and check(spec) == (0, {})


def rsyncs() -> list[str]:
    done = subprocess.run(["pgrep", "-af", f"rsync.*{MODEL}"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    ("stop", "exit_code"),
    [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGINT, 130)],
    ids=["launcher-killed", "ctrl-c"],
)
def test_an_interrupted_copy_resumes_without_copying_finished_files_again(
    spec: Path, node2: Path, model: list[str], stop: signal.Signals, exit_code: int
) -> None:
    """Killed (as with a lost connection), or Ctrl-C: the source stops its rsync; the next run continues."""
    proc = start_cli("sync", "models", spec, "--bwlimit", "30")  # about 10 s for 300 MB
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(r"node2 .* (\d+)%", line)
        if found and int(found.group(1)) >= 40:
            break
    proc.send_signal(stop)  # half-way
    assert proc.wait(timeout=60) == exit_code
    deadline = time.monotonic() + 15
    while rsyncs() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rsyncs() == []  # the source stopped its rsync: nothing goes on copying unattended
    finished = {
        p.name: (p.stat().st_ino, p.stat().st_ctime_ns)
        for p in node2.iterdir()
        if p.name in model and p.read_bytes() == (MODEL / p.name).read_bytes()
    }
    assert 0 < len(finished) < SHARDS
    code, result = sync(spec)
    planned = plan_of(result)
    assert code == 0 and planned["state"] == "copied"
    assert not set(finished) & set(planned["send"])
    assert {n: ((node2 / n).stat().st_ino, (node2 / n).stat().st_ctime_ns) for n in finished} == finished
    assert same_files(node2)


def test_a_target_too_small_is_refused_before_any_byte_is_copied(spec: Path, node2: Path) -> None:
    node2.mkdir()
    run_bed("tmpfs", "node2", str(MODEL), "--size", "64M")  # in node2's view only
    try:
        done = cli("sync", "models", spec, timeout=600)
        listing = subprocess.run(
            ["ssh", "-F", str(BED / "ssh_config"), "node2", f"ls -A {MODEL}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        run_bed("unbind", "node2", str(MODEL))
    assert done.returncode == 1
    assert (
        "node2: refused" in done.stdout
        and "not enough space on node2: the copy needs 300.0 MB" in done.stdout
    )
    assert f"{MODEL} has 67.1 MB (67108864 bytes) free" in done.stdout
    assert listing == ""  # not one file was written


def test_a_read_only_target_is_refused(spec: Path, node2: Path) -> None:
    node2.mkdir()
    run_bed("bind", "node2", "--read-only", str(node2), str(MODEL))
    try:
        code, result = sync(spec)
    finally:
        run_bed("unbind", "node2", str(MODEL))
    planned = plan_of(result)
    assert code == 1 and planned["state"] == "refused"
    assert result["nodes"][0]["dirs"][0]["problems"] == [f"cannot write {MODEL} on node2"]
    assert "chown" in result["nodes"][0]["hint"]


def test_an_identical_node_is_skipped(spec: Path, node2: Path) -> None:
    shutil.copytree(MODEL, node2, ignore=shutil.ignore_patterns(".*"))
    sync(spec)  # the first look hashes node2's copy once
    started = time.monotonic()
    code, result = sync(spec)
    seconds = time.monotonic() - started
    assert code == 0 and plan_of(result)["state"] == "identical"
    assert result["models"][0]["hashed_bytes"] == 0  # the source's manifest came from its cache
    print(f"\nan identical node confirmed in {seconds:.2f} s (the whole CLI run)")


def test_without_ssh_between_the_nodes_it_says_how_and_the_relay_copies(spec: Path, node2: Path) -> None:
    """node1's remote shell knows no key nor host key for node2 (as a fresh pair of Sparks)."""
    run_bed("up", "--node-env", "node1:RSYNC_RSH=ssh -F /dev/null -o BatchMode=yes")
    try:
        run_bed("bind", "node2", str(NODE2), str(PARENT))  # the restarted sshd lost the mount
        direct = cli("sync", "models", spec, timeout=600)
        copied_anything = node2.exists()
        code, relayed = sync(spec, "--relay")
    finally:
        run_bed("up")
    assert direct.returncode == 4 and not copied_anything
    assert "node1 cannot reach node2 at 10.99.0.2 over SSH with `ssh -F /dev/null" in direct.stdout
    assert "ssh-copy-id 10.99.0.2" in direct.stdout and "--relay" in direct.stdout
    assert code == 0 and plan_of(relayed)["state"] == "copied" and relayed["relay"] is True
    assert same_files(node2)
