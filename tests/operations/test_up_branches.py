"""`up`'s failure branches through a scripted FAKE executor (tests/fakes/executor.py): a rank
that cannot start, a node lost while waiting, a busy or stale lock."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from launcher.core.plan import build_plan
from launcher.core.vllm.models import kind_facts
from launcher.load import catalog_for
from launcher.node.cluster import Cluster, ClusterBusy
from launcher.node.executor import NodeError, Result
from launcher.operations.reporter import Silent
from launcher.operations.running.starting import StartupFailed, UpOptions, up
from tests.conftest import base_spec, spec_of
from tests.fakes.executor import Handler, ScriptedExecutor

FAST = UpOptions(timeout=5, check=False, grace=1, lost_after=0.5)
STOPPED = {"ok": True, "found": 1, "groups": 1, "killed": 0, "remaining": 0}
IDLE = {"ok": True, "alive": False, "processes": 0, "state": None}
STACKS = {"ok": True, "py_spy": None, "processes": [], "texts": {"log-tail.txt": "(the last lines)\n"}}


def heartbeats(*first: dict[str, Any], seconds: float = 10) -> Iterator[dict[str, Any]]:
    """What a node's watch sends: `first`, then a heartbeat every 0.05 s (the real one: 1 s)."""
    yield from first
    for _ in range(int(seconds / 0.05)):
        time.sleep(0.05)
        yield {"alive": True}


def cluster_with(
    handlers: dict[tuple[str, str], Handler], nodes: int = 2
) -> tuple[Cluster, ScriptedExecutor]:
    spec = spec_of(base_spec("0.32.0", nodes=2))
    plan = build_plan(spec, kind_facts("hybrid", "test"), catalog_for(spec))
    executor = ScriptedExecutor(
        {
            ("*", "cluster_lock"): lambda w: {"ok": True, **({"status": IDLE} if "hold" in w else {})},
            ("*", "rank_status"): lambda w: IDLE,
            ("*", "shell"): lambda w: Result(" ".join(w), 0, "", ""),
            ("*", "start"): lambda w: {
                "ok": True,
                "state": {"run_id": "20260101-000000-abcd", "digest": "d1", "pid": 7},
            },
            ("*", "stop"): lambda w: STOPPED,
            ("*", "stacks"): lambda w: STACKS,
            **handlers,
        }
    )
    return Cluster(spec, plan, executor), executor


def test_a_rank_that_cannot_start_stops_every_node() -> None:
    cluster, executor = cluster_with({("n2", "start"): lambda w: {"ok": False, "error": "no vllm here"}})
    with pytest.raises(StartupFailed) as caught:
        up(cluster, {}, FAST, Silent())
    assert caught.value.message == "could not start on n2: no vllm here"
    assert caught.value.hint == "every node was stopped"
    assert "stop" in executor.keys("n1") and "stop" in executor.keys("n2")


def until_stopped() -> Iterator[dict[str, Any]]:
    """A watch that never ends by itself: heartbeats until the follower stops reading."""
    while True:
        time.sleep(0.05)
        yield {"alive": True}


def test_a_node_whose_connection_drops_while_waiting_is_lost_and_the_others_stopped() -> None:
    cluster, executor = cluster_with(
        {
            ("n1", "watch"): lambda w: until_stopped(),
            ("n2", "watch"): lambda w: NodeError("n2", "connection lost: EOF"),
            ("n2", "stop"): lambda w: NodeError("n2", "connection lost: EOF"),
        }
    )
    executor.http_status = 503
    # No clock can decide this one: n2's drop is the only way the wait can end (however late
    # its thread runs on a loaded machine, nobody falls silent and nothing times out first).
    patient = replace(FAST, timeout=600, lost_after=600)
    with pytest.raises(NodeError) as caught:
        up(cluster, {}, patient, Silent())
    assert caught.value.message == (
        "node n2: lost while waiting (node n2: connection lost: EOF); "
        "every other node was stopped; could not reach n2 to stop it"
    )
    calls = [k for k in executor.keys("n1") if k != "shell"]  # the receipt is written meanwhile
    assert calls[-2:] == ["stop", "cluster_lock"]  # stopped, then the lock released


def test_a_node_that_falls_silent_is_lost_after_lost_after_seconds() -> None:
    hang = threading.Event()
    cluster, executor = cluster_with(
        {("*", "watch"): lambda w: heartbeats(), ("n2", "watch"): lambda w: hang.wait(10) and []}
    )
    executor.http_status = 503
    try:
        with pytest.raises(NodeError) as caught:
            up(cluster, {}, FAST, Silent())
    finally:
        hang.set()
    assert caught.value.message.startswith("node n2: lost while waiting (no word from it for ")
    assert "stop" in executor.keys("n2")  # it answered the stop: nothing was left running
    assert caught.value.message.endswith("; every node was stopped")


def test_a_rank_that_exits_while_starting_is_reported_and_every_node_stopped() -> None:
    log = {"log": "(EngineCore) ERROR Engine core initialization failed\n", "log_size": 54}
    cluster, executor = cluster_with(
        {
            ("n1", "watch"): lambda w: heartbeats(),
            ("n2", "watch"): lambda w: [log, {"alive": False, "exit_code": 1}],
        }
    )
    executor.http_status = 503
    lines: list[str] = []
    reporter = Silent()
    reporter.info = lines.append  # type: ignore[method-assign]
    with pytest.raises(StartupFailed) as caught:
        up(cluster, {}, FAST, reporter)
    assert caught.value.message.startswith("n2 (rank 1) exited with status 1 after ")
    said = "at 'started': capturing every rank's stacks, then stopping every node"
    assert any(line.endswith(said) for line in lines)
    for node in ("n1", "n2"):  # the evidence is taken while every other rank still runs
        keys = executor.keys(node)
        assert "stacks" in keys and "stop" in keys and keys.index("stacks") < keys.index("stop")


def test_a_busy_cluster_is_refused_saying_who_holds_it() -> None:
    holder = {"token": "x", "host": "elsewhere", "pid": 1, "user": "ops", "command": "up", "since": 0}
    cluster, executor = cluster_with({("n1", "cluster_lock"): lambda w: {"ok": False, "holder": holder}})
    with pytest.raises(ClusterBusy) as caught:
        up(cluster, {}, FAST, Silent())
    assert caught.value.message.startswith("cluster t is busy: `up` by ops@elsewhere (pid 1) since ")
    assert "start" not in executor.keys("n1") + executor.keys("n2")


def test_a_lock_left_by_a_dead_process_here_is_taken_over() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    holder = {"token": "x", "host": socket.gethostname(), "pid": dead.pid, "command": "up", "since": 0}
    answers = iter([{"ok": False, "holder": holder}, {"ok": True, "status": IDLE}, {"ok": True}])
    cluster, executor = cluster_with({("n1", "cluster_lock"): lambda w: next(answers)})
    executor.handlers[("n2", "start")] = lambda w: {"ok": False, "error": "x"}
    with pytest.raises(StartupFailed):  # it went on to start: the lock was taken over
        up(cluster, {}, FAST, Silent())
    locks = [words[4:] for _, key, words in executor.calls if key == "cluster_lock"]  # python3 - lock DIR ...
    assert [x[0] for x in locks] == ["hold", "hold", "release"]
    assert locks[1][2:] == ["x"]  # broken in one step, naming the stale holder's token


def stopped_after_start(executor: ScriptedExecutor, node: str) -> bool:
    keys = executor.keys(node)
    return "start" in keys and "stop" in keys[keys.index("start") :]


@pytest.mark.parametrize(
    "answer",
    [
        Result("", 0, '{"ok": true, "state": {"run_id": "r1", "dig\n', ""),  # cut short: not JSON
        Result("", 0, '{"ok": true, "state": "started, trust me"}\n', ""),  # not the shape it must have
        Result("", 0, '{"ok": true, "state": {"run_id": "r1\\u001b[2J", "digest": "d1"}}\n', ""),
    ],
    ids=["not-json", "wrong-shape", "control-character"],
)
def test_a_malformed_start_answer_stops_every_rank_already_started(answer: Result) -> None:
    """n1 starts; n2's answer does not parse: nothing is left half-started, and n2 is named."""
    cluster, executor = cluster_with({("n2", "start"): lambda w: answer})
    with pytest.raises(StartupFailed) as caught:
        up(cluster, {}, FAST, Silent())
    assert caught.value.message.startswith(
        "could not start on n2: malformed answer from the node script start"
    )
    assert caught.value.hint == "every node was stopped"
    assert stopped_after_start(executor, "n1") and stopped_after_start(executor, "n2")


def test_a_start_that_fails_for_any_other_reason_still_stops_every_rank() -> None:
    def broken(words: list[str]) -> Result:
        raise RuntimeError("a bug in the launcher")

    cluster, executor = cluster_with({("n2", "start"): broken})
    with pytest.raises(RuntimeError, match="a bug in the launcher"):
        up(cluster, {}, FAST, Silent())
    assert stopped_after_start(executor, "n1") and stopped_after_start(executor, "n2")
