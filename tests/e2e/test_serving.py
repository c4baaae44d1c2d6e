"""One real tensor-parallel-2 vLLM pair on the test bed, shared by every test that can:
up, status, logs, verify (prefix-cache hits grow), idempotence, refusals, secrets, down."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import NAMESPACES, cli, down_if_running, marked_processes, only, spec_file, start_cli

pytestmark = [pytest.mark.testbed, pytest.mark.vllm_server]

SECRET = "sk-planted-" + secrets.token_hex(8)
RUN_ROOT = Path.home() / ".spark-launch" / "demo"


@pytest.fixture(scope="module")
def served(testbed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`spark-launch up` of the demo (with a planted secret), for the whole module."""
    folder = tmp_path_factory.mktemp("serving")
    spec = spec_file(folder, secrets=["SPARK_DEMO_TOKEN"])
    env = {"SPARK_DEMO_TOKEN": SECRET, "XDG_STATE_HOME": str(folder / "state")}  # the module's receipts
    down_if_running(spec)
    began = time.monotonic()
    done = cli("up", spec, "--json", env=env, timeout=900)
    seconds = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    yield {"spec": spec, "env": env, "up": done, "up_seconds": seconds, "result": only(done.stdout)}
    cli("down", spec, "--grace", "5")


def test_up_serves_the_model(served: dict[str, Any]) -> None:
    result = served["result"]
    assert result["started"] is True and result["model"] == "tiny-qwen3-next"
    assert result["url"] == "http://10.99.0.1:8000/v1"
    stages = served["up"].stderr
    for stage in ("node1: rendezvous", "node2: loading weights", "node1: API up"):
        assert stage in stages
    # the demo's API listens on node1's address with no endpoint in front and no key: said first
    assert "warning: the API listens on 10.99.0.1:8000 with no endpoint in front" in stages
    print(f"\nup -> healthy: {served['up_seconds']:.1f} s wall, {result['seconds']:.1f} s measured by up")


def test_status_shows_both_ranks_running_the_spec_plan(served: dict[str, Any]) -> None:
    done = cli("status", served["spec"], "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    status = only(done.stdout)
    assert status["state"] == "running" and status["health"] == 200 and status["model"] == "tiny-qwen3-next"
    assert [(n["name"], n["rank"], n["running"], n["plan_matches"]) for n in status["nodes"]] == [
        ("node1", 0, True, True),
        ("node2", 1, True, True),
    ]
    assert all(n["pid"] and n["processes"] >= 2 for n in status["nodes"])


def test_logs_are_prefixed_by_node(served: dict[str, Any]) -> None:
    done = cli("logs", served["spec"], "-n", "5")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len([x for x in lines if x.startswith("node1 | ")]) == 5
    assert len([x for x in lines if x.startswith("node2 | ")]) == 5
    only = cli("logs", served["spec"], "-n", "2", "--node", "node2").stdout.splitlines()
    assert len(only) == 2 and all(x.startswith("node2 | ") for x in only)


def test_logs_follow_streams_until_interrupted(served: dict[str, Any]) -> None:
    proc = start_cli("logs", served["spec"], "-f", "-n", "1")
    try:
        assert proc.stdout is not None
        # Each node's last line, then what follows: the head may log a line (a request, its
        # periodic stats) before the worker's last line arrives, so read until both came.
        seen: set[str] = set()
        for _ in range(20):
            seen.add(proc.stdout.readline().split(" | ")[0].strip())
            if seen >= {"node1", "node2"}:
                break
        assert seen == {"node1", "node2"}
        cli("status", served["spec"])  # makes the head log a request line while we follow
        assert " | " in proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 130


@pytest.fixture(scope="module")
def verified(served: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """One `verify --json` of the served pair, for every test that reads it."""
    return cli("verify", served["spec"], "--json", timeout=300)


def test_verify_proves_completion_and_prefix_cache_hits(verified: subprocess.CompletedProcess[str]) -> None:
    done = verified
    assert done.returncode == 0, done.stdout + done.stderr
    result = only(done.stdout)
    assert {c["name"]: c["ok"] for c in result["checks"]} == {
        "models": True,
        "completion": True,
        "prefix cache": True,
    }
    hits = result["prefix_cache_hits_after_each_send"]
    assert hits[-1] > 0 and hits[-1] % int(result["cache_config"]["block_size"]) == 0
    assert result["cache_config"]["mamba_cache_mode"] == "align"
    assert result["cache_config"]["enable_prefix_caching"] == "True"


def test_check_on_the_running_cluster_agrees_with_what_the_server_reports(
    served: dict[str, Any], verified: subprocess.CompletedProcess[str]
) -> None:
    done = cli("check", served["spec"], "--json", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    probe = {r["item"]: r["values"] for r in json.loads(done.stdout)["rows"] if r["area"] == "probe"}
    live = only(verified.stdout)["cache_config"]
    for node in ("node1", "node2"):
        assert probe["mamba_cache_mode"][node] == live["mamba_cache_mode"] == "align"
        assert str(probe["enable_prefix_caching"][node]) == live["enable_prefix_caching"] == "True"
    # The attention block size is raised later, inside each worker, for hybrid models: the probe
    # sees the config-time value; the server reports the aligned one.
    print(f"\nblock size: probe {probe['block_size']}, running server {live['block_size']}")


def test_up_again_with_the_same_plan_does_nothing(served: dict[str, Any]) -> None:
    done = cli("up", served["spec"], env=served["env"])
    assert done.returncode == 0 and "nothing to do" in done.stdout


def test_up_with_another_plan_is_refused_without_replace(served: dict[str, Any], tmp_path: Path) -> None:
    other = spec_file(tmp_path, serve={"max_model_len": 256}, secrets=["SPARK_DEMO_TOKEN"])
    done = cli("up", other, env=served["env"])
    assert done.returncode == 1
    assert "already running" in done.stderr and "--replace" in done.stderr
    assert only(cli("status", served["spec"], "--json").stdout)["state"] == "running"
    assert cli("status", other).returncode == 1  # drift: the nodes run another plan than this spec's


def test_a_second_up_at_once_is_refused(served: dict[str, Any]) -> None:
    lock = RUN_ROOT / "lock"
    lock.mkdir()
    (lock / "holder.json").write_text(
        json.dumps(
            {
                "token": "x",
                "host": "elsewhere",
                "pid": 1,
                "command": "up",
                "user": "ops",
                "since": time.time(),
            }
        )
    )
    try:
        done = cli("up", served["spec"], env=served["env"])
    finally:
        (lock / "holder.json").unlink()
        lock.rmdir()
    assert done.returncode == 1 and "is busy: `up` by ops@elsewhere" in done.stderr


def test_the_secret_reaches_vllm_and_nowhere_else(served: dict[str, Any]) -> None:
    pids = marked_processes()
    assert any(SECRET.encode() in Path(f"/proc/{p}/environ").read_bytes() for p in pids)  # delivered
    for ns in NAMESPACES.values():
        ps = subprocess.run(
            ["ip", "netns", "exec", ns, "ps", "-eo", "args"], capture_output=True, text=True, check=True
        )
        assert SECRET not in ps.stdout
    files = [p for p in RUN_ROOT.rglob("*") if p.is_file()]
    assert files and not any(SECRET.encode() in p.read_bytes() for p in files)
    assert not list(RUN_ROOT.rglob("run.json"))
    outputs = [served["up"].stdout, served["up"].stderr]
    for args in (
        ("status", served["spec"]),
        ("logs", served["spec"], "-n", "400"),
        ("plan", served["spec"], "--json"),
        ("up", served["spec"], "--dry-run"),
    ):
        done = cli(*args, env=served["env"])
        outputs += [done.stdout, done.stderr]
    assert not any(SECRET in text for text in outputs)


def test_diagnose_bundles_everything_and_no_secret(served: dict[str, Any], tmp_path: Path) -> None:
    """The secret is planted in node2's log (as if the engine had printed it); only the running
    processes know its value (this environment does not): the node takes it out."""
    log = Path(json.loads((RUN_ROOT / "node2" / "state.json").read_text())["log"])
    size = log.stat().st_size
    with log.open("a") as f:
        f.write(f"DEBUG token {SECRET} seen\n")
    bundle = tmp_path / "bundle.tar.gz"
    try:
        done = cli("diagnose", served["spec"], "-o", bundle, timeout=600)
    finally:
        os.truncate(log, size)
    assert done.returncode == 0, done.stderr
    with tarfile.open(bundle) as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert SECRET.encode() not in b"".join(members.values())
    assert any(
        b"DEBUG token <redacted> seen" in v for k, v in members.items() if k.startswith("nodes/node2/logs/")
    )
    assert json.loads(members["status.json"])["serving"]["state"] == "serving"
    versions = json.loads(members["nodes/node1/versions.json"])
    assert versions["vllm"].startswith("0.32.0") and versions["torch"] and versions["kernel"]
    for part in (
        "check.json",
        "plan.json",
        "spec.yaml",
        "nodes/node2/ip-addr.txt",
        "nodes/node2/dmesg-tail.txt",
    ):
        assert part in members
    print(f"\ndiagnose: {len(members)} files, {bundle.stat().st_size / 1024:.0f} KiB")


def test_up_replace_restarts_with_the_new_plan(served: dict[str, Any], tmp_path: Path) -> None:
    other = spec_file(tmp_path, env={"VLLM_LOGGING_LEVEL": "INFO"}, secrets=["SPARK_DEMO_TOKEN"])
    before = only(cli("status", served["spec"], "--json").stdout)
    done = cli("up", other, "--replace", "--no-probe", env=served["env"], timeout=900)
    assert done.returncode == 0, done.stderr
    assert "--replace: stopping the running cluster" in done.stderr
    after = only(cli("status", other, "--json").stdout)
    assert after["state"] == "running" and after["plan"] != before["plan"]
    assert {n["run_id"] for n in after["nodes"]} != {n["run_id"] for n in before["nodes"]}
    served["replaced"] = other


def test_runs_lists_both_runs_and_diff_names_the_one_variable(served: dict[str, Any]) -> None:
    """The module's two starts (its `up`, then `up --replace` with one variable more) each left
    a receipt, here and on the head; `diff` names that variable and nothing else of the nodes."""
    done = cli("runs", served["spec"], "--json", env=served["env"])
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert [(r["outcome"], r["checked"]) for r in found] == [("served", True), ("served", True)]
    assert found[0]["run_id"] == served["result"]["run_id"]
    kept = Path(served["env"]["XDG_STATE_HOME"]) / "spark-launch" / "demo" / "runs"
    receipt = json.loads((kept / f"{found[1]['run_id']}.json").read_text())
    node2 = receipt["nodes"]["node2"]
    assert node2["vllm"]["release"] == "0.32.0+cpu" and node2["vllm"]["build"]
    assert node2["models"]["model"]["files"] and node2["host"]["kernel"]
    assert node2["env"]["SPARK_DEMO_TOKEN"] == "(secret)" and receipt["check"]
    assert {p.name for p in (RUN_ROOT / "runs").glob("*.json")} >= {f"{r['run_id']}.json" for r in found}
    for path in [*kept.rglob("*.json"), *(RUN_ROOT / "runs").glob("*.json")]:
        assert SECRET not in path.read_text()
    done = cli("diff", served["spec"], "--json", env=served["env"])
    assert done.returncode == 1, done.stderr  # something differs
    changes = json.loads(done.stdout)["changes"]
    name = "VLLM_LOGGING_LEVEL"
    assert {(c["node"], c["area"], c["item"]) for c in changes} == {
        (None, "plan", "digest"), ("node1", "env", name), ("node2", "env", name)
    }  # fmt: skip
    text = cli("diff", served["spec"], env=served["env"]).stdout
    assert "every node   env    VLLM_LOGGING_LEVEL: (none) -> sha256:" in text
    now = cli("diff", served["replaced"], "now", env=served["env"])
    assert now.returncode == 0 and "no differences" in now.stdout, now.stdout + now.stderr


def test_down_stops_ours_only_and_is_safe_twice(served: dict[str, Any]) -> None:
    # An unrelated vLLM-looking process on node1: down must leave it alone.
    stranger = subprocess.Popen(
        ["ip", "netns", "exec", "sl-node1", "bash", "-c", "exec -a 'vllm serve other' sleep 300"]
    )
    try:
        while not Path(f"/proc/{stranger.pid}/cmdline").read_bytes().startswith(b"vllm serve other"):
            time.sleep(0.05)  # until it has become what it pretends to be
        assert marked_processes()
        began = time.monotonic()
        done = cli("down", served["spec"])
        print(f"\ndown: {time.monotonic() - began:.1f} s")
        assert done.returncode == 0, done.stderr
        assert "node1: stopped" in done.stderr and "node2: stopped" in done.stderr
        assert marked_processes() == []
        assert stranger.poll() is None
        again = cli("down", served["spec"])
        assert again.returncode == 0 and "nothing running" in again.stderr
        assert only(cli("status", served["spec"], "--json").stdout)["state"] == "stopped"
    finally:
        stranger.kill()
