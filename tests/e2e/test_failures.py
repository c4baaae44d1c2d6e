"""Start-up failures, each caused for real on the test bed: `up` must say which node, how
and why, within seconds, and leave nothing running. One vLLM pair at a time.

These test what `up` does once vLLM runs, so they pass --skip-check: `check` would refuse
most of these deployments before starting anything (tests/e2e/test_check.py)."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.load import plan_file
from launcher.node.cluster import Cluster
from launcher.node.ssh import SshExecutor
from launcher.operations.reporter import Silent
from launcher.operations.running.starting import StartupFailed, UpOptions, up
from tests.e2e.conftest import (
    BED,
    DEMO,
    cli,
    hold_port,
    marked_processes,
    only,
    spec_file,
    start_cli,
    wait_for_line,
)

pytestmark = [pytest.mark.testbed, pytest.mark.vllm_server]


def test_hand_split_prefix_caching_dies_with_the_kv_spec_assertion(clean_demo: None) -> None:
    """The field failure, reproduced: node2 started with prefix caching off, all else equal.
    (test_serving shows spark-launch's own commands for this same deployment serving.)"""
    spec, plan = plan_file(DEMO)
    worker = plan.nodes[1]
    split = tuple(
        "--no-enable-prefix-caching" if a == "--enable-prefix-caching" else a
        for a in worker.argv
        if not a.startswith("--mamba-cache-mode")
    )
    tampered = dataclasses.replace(plan, nodes=(plan.nodes[0], dataclasses.replace(worker, argv=split)))
    cluster = Cluster(
        spec, tampered, SshExecutor({n.name: n.ssh for n in spec.nodes}, str(BED / "ssh_config"))
    )
    try:
        with pytest.raises(StartupFailed) as caught:
            up(cluster, {}, UpOptions(timeout=300, grace=5, check=False), Silent())
    finally:
        cluster.executor.close()
    text = caught.value.render()
    assert "node1 (rank 0) exited" in text
    assert "KV cache specs for the same layer are different across workers" in text
    assert "the nodes derived different KV cache specs" in text
    assert marked_processes() == []  # the headless node, which never fails by itself, was stopped too


def test_a_dying_rank_is_reported_within_seconds_and_everything_stops(clean_demo: None) -> None:
    proc = start_cli("up", DEMO, "--skip-check")
    wait_for_line(proc, "node2: configuring")  # its engine is running
    state = json.loads((Path.home() / ".spark-launch/demo/node2/state.json").read_text())
    killed = time.monotonic()
    subprocess.run(["kill", "-KILL", "--", f"-{state['pgid']}"], check=True)
    said = wait_for_line(proc, "node2 (rank 1) exited with status", timeout=60)[-1]
    reported = time.monotonic() - killed
    _, err = proc.communicate(timeout=120)
    stopped = time.monotonic() - killed
    print(f"\nrank death -> said {reported:.1f} s, every node stopped {stopped:.1f} s (no timing asserted)")
    assert said.rstrip().endswith(": capturing every rank's stacks, then stopping every node"), said
    assert proc.returncode == 1
    assert "node2 (rank 1) exited" in err and "every node was stopped" in err
    assert marked_processes() == []


def test_ctrl_c_during_up_stops_what_was_started(clean_demo: None) -> None:
    proc = start_cli("up", DEMO, "--skip-check")
    wait_for_line(proc, ": configuring")  # every rank was started before any is watched
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert marked_processes() == []


def test_losing_a_node_while_waiting_stops_the_others_and_names_it(clean_demo: None) -> None:
    proc = start_cli("up", DEMO, "--skip-check")
    wait_for_line(proc, "node2: configuring")
    sshd = subprocess.run(["ip", "netns", "pids", "sl-node2"], capture_output=True, text=True, check=True)
    for pid in sshd.stdout.split():
        if "sshd" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            subprocess.run(["kill", "-KILL", pid], check=False)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 4, err
    assert "node node2: lost while waiting (the connection closed)" in err
    assert "every other node was stopped; could not reach node2 to stop it" in err
    assert marked_processes("demo/node1") == [] and marked_processes("demo/node2")
    subprocess.run([sys.executable, "-m", "testbed", "up"], check=True, capture_output=True)  # sshd back
    seen = cli("status", DEMO, "--json", "--no-watchdog")
    status = only(seen.stdout)
    assert seen.returncode == 1 and status["state"] == "partial", seen.stdout + seen.stderr
    assert [(n["name"], n["running"]) for n in status["nodes"]] == [("node1", False), ("node2", True)]
    stopped = cli("down", DEMO, "--grace", "5")
    assert stopped.returncode == 0 and "node2: stopped" in stopped.stderr, stopped.stderr
    assert marked_processes() == []


@pytest.mark.parametrize(
    ("changes", "failing", "diagnosis"),
    [
        (
            {"nodes": {0: {"interface": "lo"}, 1: {"interface": "lo"}}},
            "(rank",  # whichever rank gives up first
            "Gloo could not connect the nodes",
        ),
        ({"nodes": {1: {"address": "10.99.0.7"}}}, "node2 (rank 1)", "does not hold the address"),
        ({"model": {"path": "/tmp/spark-launch-testbed/no-such-model"}}, "(rank", "model was not found"),
    ],
    ids=["gloo-wrong-interface", "address-not-on-node", "model-missing"],
)
def test_known_failures_are_diagnosed(
    clean_demo: None, tmp_path: Path, changes: dict[str, object], failing: str, diagnosis: str
) -> None:
    done = cli("up", spec_file(tmp_path, **changes), "--skip-check", timeout=300)
    assert done.returncode == 1, done.stderr
    found = [line for line in done.stderr.splitlines() if line.strip().startswith("diagnosis:")]
    assert failing in done.stderr and found and diagnosis in found[0], done.stderr
    assert "every node was stopped" in done.stderr
    assert marked_processes() == []


def test_port_in_use_is_diagnosed(clean_demo: None) -> None:
    holder = hold_port("sl-node1", 8000)
    try:
        done = cli("up", DEMO, "--skip-check", timeout=300)
    finally:
        holder.kill()
    assert done.returncode == 1
    assert "node1 (rank 0) exited with status 1" in done.stderr
    assert "diagnosis: a port is already in use on the node" in done.stderr
    assert marked_processes() == []


def test_timeout_stops_everything(clean_demo: None) -> None:
    done = cli("up", DEMO, "--skip-check", "--timeout", "5", timeout=120)
    assert done.returncode == 1
    assert "did not serve within 5 s" in done.stderr
    assert marked_processes() == []
