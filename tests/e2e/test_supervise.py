"""supervise on the test bed with the real vLLM pair: a rank killed, then a rank frozen while the
head still answers /health; each time every rank is restarted together and the cluster serves
again; SIGTERM stops it all. One supervised pair for both (each restart costs a pair's start).
A restart storm (the real vLLM asked for a model that is not there: every start dies) gives
up after the limit with nothing left. Times are printed, not asserted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import DEMO, cli, marked_processes, only, spec_file, start_cli

pytestmark = [pytest.mark.testbed, pytest.mark.vllm_server]

RUNS = Path.home() / ".spark-launch"


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_event(path: Path, what: str, after: int, proc: subprocess.Popen[str], timeout: float) -> int:
    """The index of the first event `what` after index `after`, as soon as it is written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [i for i, e in enumerate(events(path)) if i > after and e["what"] == what]
        if found:
            return found[0]
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"no {what!r} after event {after}: {[e['what'] for e in events(path)]}")


def rank_group(cluster: str, node: str) -> int:
    return int(json.loads((RUNS / cluster / node / "state.json").read_text())["pgid"])


def test_a_dead_rank_and_a_wedged_engine_each_restart_the_whole_cluster(
    clean_demo: None, tmp_path: Path, state_home: Path
) -> None:
    log = tmp_path / "events.jsonl"
    proc = start_cli(
        "supervise", DEMO, "--events", log, "--backoff", "1", "--interval", "10", "--deadline", "10",
        "--timeout", "400", "--grace", "5",
    )  # fmt: skip
    progress: list[str] = []  # read as it comes, so a full pipe never blocks the supervisor
    threading.Thread(target=lambda: progress.extend(iter(proc.stderr.readline, "")), daemon=True).start()  # type: ignore[union-attr]
    try:
        first = wait_event(log, "serving", -1, proc, 600)
        runs = {only(cli("status", DEMO, "--json", "--no-watchdog").stdout)["nodes"][1]["run_id"]}

        killed = time.monotonic()
        os.killpg(rank_group("demo", "node2"), signal.SIGKILL)
        died = wait_event(log, "rank exited", first, proc, 60)
        seen = time.monotonic() - killed
        second = wait_event(log, "serving", died, proc, 600)
        back = time.monotonic() - killed
        status = only(cli("status", DEMO, "--json").stdout)
        assert status["state"] == "running" and status["serving"]["state"] == "serving", status
        runs |= {n["run_id"] for n in status["nodes"]}
        assert len(runs) == 2  # both ranks of the new run share one run id: a whole-cluster restart
        print(f"\nrank killed -> supervise reports it: {seen:.1f} s; -> serving again: {back:.1f} s")

        frozen = time.monotonic()
        os.killpg(rank_group("demo", "node2"), signal.SIGSTOP)
        done = cli("status", DEMO, "--json", "--deadline", "5")
        told = time.monotonic() - frozen
        status = only(done.stdout)
        assert done.returncode == 1 and status["health"] == 200, status
        assert status["serving"]["state"] == "wedged", status
        wedged = wait_event(log, "wedged", second, proc, 120)
        caught = time.monotonic() - frozen
        frozen_run = only(cli("status", DEMO, "--json", "--no-watchdog").stdout)["nodes"][1]["run_id"]
        wait_event(log, "serving", wedged, proc, 600)
        again = time.monotonic() - frozen
        print(
            f"rank frozen -> `status --deadline 5` says wedged: {told:.1f} s; supervise (every 10 s, "
            f"deadline 10 s) restarts: {caught:.1f} s; serving again: {again:.1f} s"
        )

        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        assert proc.returncode == 0, "".join(progress[-40:])
    finally:
        if proc.poll() is None:
            proc.kill()
    whats = [e["what"] for e in events(log)]
    assert whats == [
        "supervising",
        "serving",
        "captured",
        "rank exited",
        "serving",
        "captured",
        "wedged",
        "serving",
        "stopping",
        "stopped",
    ]
    # node2's rank was killed; the head's engine ends within a second of losing it, so the first
    # exit the supervisor hears of may be either rank's (each node's watch polls on its own tick)
    assert events(log)[3]["node"] in {"node1", "node2"} and events(log)[6]["node"] == "node1"
    _the_frozen_ranks_stacks_are_in_its_receipt(events(log)[5], state_home, frozen_run)
    assert all(set(e) == {"time", "cluster", "node", "what", "why", "action"} for e in events(log))
    assert marked_processes() == []


def _the_frozen_ranks_stacks_are_in_its_receipt(captured: dict[str, Any], state: Path, run_id: str) -> None:
    """Taken before the stop: node2's frozen processes, read by py-spy without pausing them."""
    assert f"the receipt of run {run_id}" in captured["action"] and "node2-stacks.txt" in captured["action"]
    receipt = json.loads((state / "spark-launch" / "demo" / "runs" / f"{run_id}.json").read_text())
    (evidence,) = receipt["evidence"]
    assert evidence["why"].startswith("wedged: ")
    node2 = evidence["nodes"]["node2"]
    assert node2["py_spy"] and node2["processes"] and all(p["ok"] for p in node2["processes"]), node2
    assert not any(p["paused"] for p in node2["processes"])  # a frozen process cannot be paused
    assert "Thread " in node2["texts"]["stacks.txt"] and "vllm" in node2["texts"]["stacks.txt"]
    assert node2["texts"]["log-tail.txt"].strip()
    assert all(Path(f).is_file() for f in node2["files"])
    took = evidence["seconds"]
    print(f"\nfrozen rank: {len(node2['processes'])} process(es) of node2 dumped; capture took {took:.1f} s")


def test_a_restart_storm_gives_up_after_the_limit_and_leaves_nothing_running(
    testbed: Path, tmp_path: Path
) -> None:
    """The real vLLM on both nodes, for a model that is not there: every start dies."""
    data = yaml.safe_load(spec_file(tmp_path, model={"path": str(testbed / "no-such-model")}).read_text())
    data["name"] = "storm"
    spec = tmp_path / "storm.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    log = tmp_path / "events.jsonl"
    began = time.monotonic()
    done = cli(
        "supervise", spec, "--events", log, "--skip-check", "--max-restarts", "1", "--backoff", "0.5",
        "--window", "600", "--grace", "2", timeout=600,
    )  # fmt: skip
    print(f"\nrestart storm (real vLLM) -> gave up: {time.monotonic() - began:.1f} s")
    assert done.returncode == 1, done.stderr
    assert "gave up after 1 restart(s) within 600 s; last: start failed" in done.stderr
    assert [e["what"] for e in events(log)] == ["supervising", "start failed", "gave up"]
    assert "restart 1 of at most 1" in events(log)[1]["action"]
    assert "(rank" in events(log)[2]["why"] and "exited with status" in events(log)[2]["why"]
    assert marked_processes("storm") == []
