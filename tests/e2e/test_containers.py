"""The docker runtime on real Docker engines: one per bed node, in the node's network namespace,
each holding the test image (Debian + the CPU vLLM build, made from local packages).

In order, sharing one container pair where the tests can: node2 holding another vLLM build is
refused by `check` through the probe run inside each image; `sync images` refuses a node
short of space, and gives node2 the head's build (of a small image: the copy is the same);
node2's tag back on the head's build, `up` then serves TP-2 in containers (status, logs,
verify, check on the running pair); `down` removes ours only; a rank that dies, and a model
that is missing, stop every node."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import (
    BED,
    ENGINES_SECONDS,
    cli,
    marked_processes,
    only,
    spec_file,
    start_cli,
    wait_for_line,
)

pytestmark = [pytest.mark.testbed, pytest.mark.vllm_server]

DOCKER_DEMO = ROOT / "configs" / "demo-docker.yaml"
CLUSTER = "demo-docker"
TAG = "spark-launch-testbed/vllm-cpu:0.32.0"
SMALL = "spark-launch-testbed/sync-check:1"
SECRET = "sk-planted-in-a-container"
NODES = ("node1", "node2")


def engine(node: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The docker CLI against a bed node's own engine."""
    host = f"unix:///run/spark-launch-testbed/{node}/docker.sock"
    return subprocess.run(["docker", "-H", host, *args], capture_output=True, text=True, check=check)


def ours(node: str) -> list[str]:
    """The cluster's containers on a node, running or stopped."""
    found = engine(node, "ps", "--all", "--quiet", "--filter", f"label=spark-launch.cluster={CLUSTER}")
    return found.stdout.split()


def image_id(node: str, tag: str = TAG) -> str:
    return engine(node, "image", "inspect", "--format", "{{.Id}}", tag, check=False).stdout.strip()


def heads_build_on_node2() -> None:
    """node2's tag back on the head's build: `give_node2_another_build` kept it, as the parent
    of the other build, so this is a new name for an image node2 holds, not a copy."""
    if image_id("node2") != image_id("node1"):
        engine("node2", "tag", image_id("node1"), TAG)
        engine("node2", "image", "prune", "--force")  # the other build, now untagged


def small_image(node: str, content: bytes, tmp_path: Path) -> str:
    """An image of one file of `content` (and 50 MB to copy), made on the node's engine at once."""
    root = tmp_path / f"{node}-root"
    root.mkdir()
    (root / "build").write_bytes(content)
    (root / "payload").write_bytes(os.urandom(50_000_000))
    archive = subprocess.run(["tar", "-C", str(root), "-c", "."], capture_output=True, check=True).stdout
    host = f"unix:///run/spark-launch-testbed/{node}/docker.sock"
    subprocess.run(
        ["docker", "-H", host, "import", "-", SMALL], input=archive, capture_output=True, check=True
    )
    return image_id(node, SMALL)


def failing(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["item"]: r for r in report["rows"] if not r["ok"] and r["level"] == "fail"}


@pytest.fixture(scope="module")
def engines(testbed: Path) -> Iterator[None]:
    """Every node's engine up with the test image (built once and cached; loaded where missing)."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "testbed", "up", "--docker"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=ENGINES_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "test image" in line]
    print(f"\ntestbed up --docker: {time.monotonic() - began:.0f} s; {' '.join(said)}")
    cli("down", DOCKER_DEMO, "--grace", "5")
    yield
    cli("down", DOCKER_DEMO, "--grace", "5")


def give_node2_another_build(tmp_path: Path) -> None:
    """node2's image under the same name, with vLLM's mamba derivation patched to take the
    'prefix caching off' branch (mode 'none' even when pinned 'align'): another build."""
    if image_id("node2") != image_id("node1"):
        return
    site = next((BED / "vllm" / "lib").resolve().glob("python3*/site-packages"))
    original = site / "vllm/model_executor/models/config.py"
    needle = 'if cache_config.enable_prefix_caching:\n            if cache_config.mamba_cache_mode == "none":'
    text = original.read_text()
    assert needle in text
    patched = tmp_path / "config.py"
    patched.write_text(
        text.replace(needle, needle.replace("if cache_config.enable_prefix_caching:", "if False:"))
    )
    engine("node2", "rm", "--force", "sl-variant", check=False)  # left by an interrupted run
    engine("node2", "create", "--name", "sl-variant", "--network", "none", TAG)
    try:
        engine("node2", "cp", str(patched), f"sl-variant:{original}")
        engine("node2", "commit", "sl-variant", TAG)
    finally:
        engine("node2", "rm", "--force", "sl-variant")
    assert image_id("node2") != image_id("node1")


def test_the_engines_leave_the_bed_network_alone(engines: None) -> None:
    pids = [p.read_text().split()[0] for p in Path("/run/spark-launch-testbed").glob("node*/docker.pid")]
    argvs = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in pids]
    assert len(argvs) == len(NODES) and all(b"--iptables=false" in a and b"--bridge=none" in a for a in argvs)
    # Bridged traffic passes iptables on this kernel: the chain accepts it (the host's policy, or
    # the bed's own rule where something else set the policy to DROP).
    forward = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, check=True)
    assert "-P FORWARD ACCEPT" in forward.stdout or "spark-launch-testbed" in forward.stdout
    ssh = ["ssh", "-F", str(BED / "ssh_config")]
    reach = subprocess.run(
        [*ssh, "node2", "exec 3<>/dev/tcp/10.99.0.1/22 && head -c 8 <&3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert reach.stdout == "SSH-2.0-", reach.stderr
    seen = {}
    for node in NODES:  # each node's CLI reaches its own engine: its own id and data root
        info = subprocess.run(
            [*ssh, node, "docker info --format '{{.ID}} {{.DockerRootDir}}'"],
            capture_output=True,
            text=True,
            check=False,
        )
        seen[node] = info.stdout.split()
    assert seen["node1"][0] != seen["node2"][0]
    assert seen["node1"][1].endswith("node1/docker") and seen["node2"][1].endswith("node2/docker")


def test_another_vllm_build_in_node2s_image_is_caught_by_the_probe_in_the_image(
    engines: None, tmp_path: Path
) -> None:
    give_node2_another_build(tmp_path)
    done = cli("check", DOCKER_DEMO, "--json", timeout=900)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr
    bad = failing(json.loads(done.stdout))
    assert bad["image id"]["values"]["node1"] != bad["image id"]["values"]["node2"]
    assert bad["mamba_cache_mode"]["values"] == {"node1": "align", "node2": "none"}
    assert "--mamba-cache-mode" in bad["mamba_cache_mode"]["hint"]
    release = {r["item"]: r for r in json.loads(done.stdout)["rows"]}["vllm version (in the image)"]
    assert release["ok"] and release["values"] == {"node1": "0.32.0+cpu", "node2": "0.32.0+cpu"}
    up = cli("up", DOCKER_DEMO, "--no-probe", timeout=900)  # the image rows alone refuse it too
    assert up.returncode == 3 and "nothing was started" in up.stderr
    assert "FAIL vllm     image id" in up.stderr
    assert ours("node1") == ours("node2") == []


def test_sync_images_refuses_a_node_short_of_space_with_the_numbers(engines: None, tmp_path: Path) -> None:
    give_node2_another_build(tmp_path)
    before = image_id("node2")
    root = BED / "node2" / "docker"  # node2 sees a 64 MB file system where its engine keeps images
    sshd = (BED / "node2" / "sshd.pid").read_text().split()[0]
    in_node2 = ["nsenter", "--target", sshd, "--mount"]  # its sessions' own mount namespace
    subprocess.run([*in_node2, "mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(root)], check=True)
    try:
        done = cli("sync", "images", DOCKER_DEMO, timeout=600)
    finally:
        subprocess.run([*in_node2, "umount", str(root)], check=True)
    assert done.returncode == 1, done.stdout + done.stderr
    refused = re.search(
        r"node2: refused: (0\.\d) GB free in \S+, but loading (\d\.\d) GB needs about", done.stdout
    )
    assert refused, done.stdout + done.stderr
    assert image_id("node2") == before  # nothing was copied


def test_sync_images_gives_node2_the_heads_build(engines: None, tmp_path: Path) -> None:
    """On a small image of its own (copying 4 GB proves nothing more; its speed is
    bench/sync_images.py's): node2 holds another build under the head's tag."""
    head = small_image("node1", b"the head's build", tmp_path)
    assert small_image("node2", b"another build", tmp_path) != head
    spec = spec_file(tmp_path, "demo-docker.yaml", DOCKER_DEMO, vllm={"image": SMALL})
    try:
        began = time.monotonic()
        done = cli("sync", "images", spec, "--json", timeout=600)
        seconds = time.monotonic() - began
        assert done.returncode == 0, done.stdout + done.stderr
        nodes = {n["name"]: n for n in json.loads(done.stdout)["nodes"]}
        assert nodes["node1"]["action"] == "head" and nodes["node2"]["action"] == "copied"
        assert image_id("node2", SMALL) == head
        assert "node2: copied: copied" in done.stderr and "MB/s" in done.stderr  # said per node
        copied = nodes["node2"]
        print(f"\nsync images: {copied['bytes'] / 1e6:.0f} MB in {seconds:.1f} s: {copied['detail']}")
        again = cli("sync", "images", spec)
        assert again.returncode == 0 and "node2: skipped: already holds it (same image id)" in again.stdout
    finally:
        for node in NODES:
            engine(node, "rmi", "--force", SMALL, check=False)
            engine(node, "image", "prune", "--force", check=False)


@pytest.fixture(scope="module")
def served(engines: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`spark-launch up` of the docker demo (its check included, with a planted secret)."""
    spec = spec_file(
        tmp_path_factory.mktemp("containers"), "demo-docker.yaml", DOCKER_DEMO, secrets=["SPARK_DEMO_TOKEN"]
    )
    env = {"SPARK_DEMO_TOKEN": SECRET}
    heads_build_on_node2()
    began = time.monotonic()
    done = cli("up", spec, "--json", env=env, timeout=1800)
    seconds = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    yield {"spec": spec, "env": env, "up": done, "up_seconds": seconds, "result": only(done.stdout)}
    cli("down", spec, "--grace", "5")


def test_up_serves_tp2_in_containers_after_its_check(served: dict[str, Any]) -> None:
    result = served["result"]
    assert result["started"] is True and result["model"] == "tiny-qwen3-next"
    stages = served["up"].stderr
    assert "check: the nodes are alike" in stages
    for stage in ("node1: rendezvous", "node2: loading weights", "node1: API up"):
        assert stage in stages
    print(
        f"\nup -> healthy in containers: {served['up_seconds']:.1f} s wall, {result['seconds']:.1f} s by up"
    )


def test_the_containers_run_as_planned_with_the_env_from_a_file(served: dict[str, Any]) -> None:
    calls = (BED / "gpu-stand-in" / "calls.log").read_text()
    for node in NODES:
        (cid,) = ours(node)
        info = json.loads(engine(node, "inspect", cid).stdout)[0]
        host = info["HostConfig"]
        assert info["Config"]["Labels"]["spark-launch.cluster"] == CLUSTER
        assert (host["NetworkMode"], host["IpcMode"], host["ShmSize"]) == ("host", "private", 1 << 30)
        assert host["DeviceRequests"][0]["Count"] == -1  # --gpus=all reached the engine...
        assert f'"id":"{info["Id"]}"' in calls  # ...whose (FAKE) NVIDIA hook ran for this container
        assert {u["Name"]: u["Hard"] for u in host["Ulimits"]} == {"memlock": 8388608, "stack": 67108864}
        mounts = {m["Destination"]: m for m in info["Mounts"]}
        assert set(mounts) == {str(BED / "model"), "/spark-launch-cache", "/tmp/torchinductor_root"}
        assert mounts[str(BED / "model")]["RW"] is False
        cache = mounts["/spark-launch-cache"]  # what the kernels compile to, kept for the next start
        assert (cache["Type"], cache["Name"], cache["RW"]) == ("volume", "spark-launch-compile-cache", True)
        headers = mounts["/tmp/torchinductor_root"]  # torch's precompiled headers, which ignore the env
        assert (headers["Type"], headers["Name"]) == ("volume", "spark-launch-compile-cache")
        assert "TORCHINDUCTOR_CACHE_DIR=/spark-launch-cache/torchinductor" in info["Config"]["Env"]
        assert f"SPARK_DEMO_TOKEN={SECRET}" in info["Config"]["Env"]  # delivered, from the env file
        assert not [a for a in [info["Path"], *info["Args"]] if SECRET in a]
    assert not list((Path.home() / ".spark-launch" / CLUSTER).rglob("node.env"))


def test_status_shows_both_containers_running_the_plan(served: dict[str, Any]) -> None:
    done = cli("status", served["spec"], "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    status = only(done.stdout)
    assert status["state"] == "running" and status["health"] == 200
    assert [(n["name"], n["running"], n["plan_matches"]) for n in status["nodes"]] == [
        ("node1", True, True),
        ("node2", True, True),
    ]
    assert all(n["pid"] and n["processes"] >= 2 for n in status["nodes"])
    assert len(marked_processes(CLUSTER)) >= 4  # the containers' processes carry the run marker


def test_logs_and_logs_follow_read_the_containers(served: dict[str, Any]) -> None:
    lines = cli("logs", served["spec"], "-n", "5").stdout.splitlines()
    assert len([x for x in lines if x.startswith("node1 | ")]) == 5
    assert len([x for x in lines if x.startswith("node2 | ")]) == 5
    proc = start_cli("logs", served["spec"], "-f", "-n", "1")
    try:
        assert proc.stdout is not None
        first = {proc.stdout.readline().split(" | ")[0].strip() for _ in range(2)}
        assert first == {"node1", "node2"}
        cli("status", served["spec"])  # the head logs the request while we follow
        assert proc.stdout.readline().startswith("node1 | ")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 130


def test_verify_proves_completion_and_prefix_cache_hits(served: dict[str, Any]) -> None:
    done = cli("verify", served["spec"], "--json", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = only(done.stdout)
    assert all(c["ok"] for c in result["checks"]) and len(result["checks"]) == 3
    hits = result["prefix_cache_hits_after_each_send"]
    assert hits[-1] > 0 and hits[-1] % int(result["cache_config"]["block_size"]) == 0


def test_check_on_the_running_pair_says_which_image_identity_matched(served: dict[str, Any]) -> None:
    # `up` passed the check with the probe; this is about the image rows (no second probe round).
    done = cli("check", served["spec"], "--json", "--no-probe", timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    rows = {r["item"]: r for r in json.loads(done.stdout)["rows"]}
    assert rows["image id"]["ok"] and rows["image id"]["hint"] is None
    assert rows["image repo digest"]["values"] == {"node1": "(none)", "node2": "(none)"}
    assert "the image id matched" in rows["image repo digest"]["hint"]


def test_down_removes_our_containers_only(served: dict[str, Any]) -> None:
    engine("node1", "rm", "--force", "sl-stranger", check=False)
    engine("node1", "run", "--detach", "--name", "sl-stranger", "--network", "none", TAG, "sleep", "300")
    try:
        done = cli("down", served["spec"])
        assert done.returncode == 0, done.stderr
        assert "node1: stopped 1 container(s), removed 1" in done.stderr
        assert ours("node1") == ours("node2") == [] and marked_processes(CLUSTER) == []
        stranger = engine("node1", "inspect", "--format", "{{.State.Running}}", "sl-stranger")
        assert stranger.stdout.strip() == "true"
        again = cli("down", served["spec"])
        assert again.returncode == 0 and "node1: nothing running" in again.stderr
    finally:
        engine("node1", "rm", "--force", "sl-stranger")


def test_a_rank_that_dies_is_reported_and_every_node_stops(engines: None) -> None:
    proc = start_cli("up", DOCKER_DEMO, "--skip-check")
    wait_for_line(proc, "node2: configuring", timeout=900)  # its engine is running
    engine("node2", "kill", f"spark-launch-{CLUSTER}")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "node2 (rank 1) exited with status 137" in err and "every node was stopped" in err
    assert "diagnosis:" in err
    assert ours("node1") == ours("node2") == [] and marked_processes(CLUSTER) == []


def test_a_missing_model_fails_at_docker_run_and_nothing_is_left(engines: None, tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "demo-docker.yaml", DOCKER_DEMO, model={"path": str(BED / "no-such-model")})
    done = cli("up", spec, "--skip-check", timeout=300)
    assert done.returncode == 1
    assert "could not start on" in done.stderr and "bind source path does not exist" in done.stderr
    assert "every node was stopped" in done.stderr
    assert ours("node1") == ours("node2") == []
