"""supervise: whole-cluster restarts with back-off, a limit, and a clean stop. The policy is pure;
the supervisor runs through the real node agent with a FAKE vllm (tests/fakes/vllm) here, and
with the real vLLM pair on the test bed in tests/e2e/test_supervise.py."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from launcher.core.serving.supervision import Event, RestartPolicy
from launcher.errors import ExitStatus
from launcher.node.cluster import Cluster
from launcher.operations.reporter import Silent
from launcher.operations.running.cluster_status import status
from launcher.operations.running.starting import UpOptions, up
from launcher.operations.running.supervising import GaveUp, SuperviseOptions, Terminated, supervise
from tests.conftest import fake_vllm_cluster


def test_the_back_off_doubles_up_to_its_ceiling() -> None:
    policy = RestartPolicy(limit=5, window=100, backoff=10, max_backoff=30)
    assert [policy.delay([0.0] * n, 1.0) for n in range(6)] == [10, 20, 30, 30, 30, None]


def test_restarts_older_than_the_window_no_longer_count() -> None:
    policy = RestartPolicy(limit=2, window=60, backoff=1)
    assert policy.delay([0.0, 10.0], 50.0) is None
    assert policy.delay([0.0, 10.0], 65.0) == 2.0  # the restart at 0 s has left the window


def test_an_event_is_one_json_line_with_the_five_fields() -> None:
    event = Event(
        "2025-06-01T10:00:00.000+00:00", "demo", "node2", "rank exited", "exit status 137", "restart"
    )
    line = event.json_line()
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2025-06-01T10:00:00.000+00:00",
        "cluster": "demo",
        "node": "node2",
        "what": "rank exited",
        "why": "exit status 137",
        "action": "restart",
    }
    assert event.text() == "node2: rank exited (exit status 137) -> restart"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return fake_vllm_cluster(tmp_path, monkeypatch)


def options(limit: int = 3, interval: float = 30) -> SuperviseOptions:
    return SuperviseOptions(
        RestartPolicy(limit=limit, window=600, backoff=0.2, max_backoff=1),
        interval=interval,
        deadline=2.0,
        up=UpOptions(timeout=60, check=False, grace=1),
    )


def run(cluster: Cluster, opts: SuperviseOptions, react: Callable[[Event, list[Event]], None]) -> list[Event]:
    """Supervise until `react` (called with each event) raises Terminated, as SIGTERM would."""
    events: list[Event] = []

    def emit(event: Event) -> None:
        events.append(event)
        react(event, events)

    supervise(cluster, {}, opts, emit, Silent())
    return events


def kill_rank(cluster: Cluster, node: str) -> None:
    state = json.loads(
        (cluster.executor.home / ".spark-launch" / cluster.spec.name / node / "state.json").read_text()
    )  # type: ignore[attr-defined]
    os.killpg(state["pgid"], signal.SIGKILL)


def whats(events: list[Event]) -> list[str]:
    return [e.what for e in events]


def test_a_partial_run_a_dead_rank_and_a_wedged_engine_each_restart_the_whole_cluster(
    cluster: Cluster, tmp_path: Path, state_home: Path
) -> None:
    wedge = tmp_path / f"fake-vllm-{cluster.plan.api_port}" / "wedge"
    runs: list[set[str | None]] = []

    def react(event: Event, events: list[Event]) -> None:
        if event.what == "serving":
            runs.append({n.run_id for n in status(cluster, deadline=None).nodes})
        if event.what == "serving" and len(runs) == 1:
            threading.Timer(0.5, kill_rank, (cluster, "n2")).start()
        elif event.what == "serving" and len(runs) == 2:
            wedge.touch()  # every completion now hangs while /health stays 200
        elif event.what == "wedged":
            wedge.unlink()  # the restarted engine is a new one
        elif event.what == "serving":
            raise Terminated("SIGTERM")

    up(cluster, {}, UpOptions(timeout=60, check=False, grace=1), Silent())
    kill_rank(cluster, "n2")  # a rank died while nobody watched: supervise starts afresh
    while status(cluster, deadline=None).state != "partial":
        time.sleep(0.2)
    events = run(cluster, options(interval=0.5), react)
    assert whats(events) == [
        "supervising",
        "partial",
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
    assert events[1].why == "this plan runs, but not on n2" and events[-1].why == "SIGTERM"
    died, wedged = events[4], events[7]
    assert died.node == "n2" and "its processes are gone" in died.why
    assert "stop every rank, start the whole cluster in 0 s (restart 1 of at most 3" in died.action
    assert wedged.node == "n1" and "no 1-token completion finished within 2 s" in wedged.why
    assert "(restart 2 of at most 3" in wedged.action
    assert [len(r) for r in runs] == [1, 1, 1] and len(set.union(*runs)) == 3  # every rank, together
    assert status(cluster, deadline=None).state == "stopped"
    frozen = events[6]
    assert frozen.node == "n1" and "n1: stacks of 1/1 process(es)" in frozen.why, frozen
    assert "the receipt of run" in frozen.action and "n1-stacks.txt" in frozen.action
    wedged_run = runs[1].pop()
    receipt = json.loads(
        (state_home / "spark-launch" / cluster.spec.name / "runs" / f"{wedged_run}.json").read_text()
    )
    (evidence,) = receipt["evidence"]
    assert evidence["why"].startswith("wedged: /health is 200 but no 1-token completion finished")
    head = evidence["nodes"]["n1"]
    assert "vllm_api.py" in head["processes"][0]["cmdline"] and head["processes"][0]["ok"], head
    assert "do_POST (vllm_api.py" in head["texts"]["stacks.txt"]  # where the wedged completion sits
    assert "Starting vLLM server" in head["texts"]["log-tail.txt"]
    assert evidence["nodes"]["n2"]["processes"] == []  # the headless fake is `sleep`: no Python
    assert all(Path(f).is_file() for f in head["files"]) and head["files"]
    assert status(cluster, deadline=None).state == "stopped"


def test_a_restart_storm_gives_up_after_the_limit_with_nothing_left(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_FAIL", "RuntimeError: always dies at start")
    events: list[Event] = []
    with pytest.raises(GaveUp) as caught:
        supervise(cluster, {}, options(limit=1), events.append, Silent())
    assert whats(events) == ["supervising", "start failed", "gave up"]
    assert "gave up after 1 restart(s) within 600 s; last: start failed" in caught.value.message
    assert caught.value.exit_status == ExitStatus.FAILURE
    assert "n1 (rank 0) exited with status 1" in events[-1].why
    assert status(cluster, deadline=None).state == "stopped"
