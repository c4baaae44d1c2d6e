"""What `up` sends each node to start a cluster, counted through a scripted FAKE executor
(tests/fakes/executor.py): every command is a round trip, and on many real nodes each one runs
the user's shell start-up first (bench/up_overhead.py measures what that costs). A change that
sends more is a change of these counts, made on purpose."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.commands.up import up_fleet
from launcher.core import remote
from launcher.core.answers.run_answer import NodeState
from launcher.core.plan import build_plan
from launcher.core.vllm.models import kind_facts
from launcher.load import catalog_for, plan_fleet
from launcher.node.cluster import Cluster
from launcher.operations.fleet import Deployments
from launcher.operations.reporter import Silent
from launcher.operations.running.starting import PlanConflict, UpOptions, up
from tests.conftest import base_spec, spec_of
from tests.fakes.executor import Handler, ScriptedExecutor

SKIP_CHECK = UpOptions(timeout=30, check=False, grace=1, lost_after=5)
IDLE = {"ok": True, "alive": False, "processes": 0, "state": None}
RUNNING = {
    "ok": True,
    "alive": True,
    "processes": 3,
    "state": {"run_id": "20260101-000000-abcd", "digest": "d0"},
}


def serving(words: list[str]) -> Iterator[dict[str, Any]]:
    """A rank's watch: its log says the API is up (the launcher asks /health at once), then
    heartbeats until the launcher stops reading."""
    yield {"log": "INFO Application startup complete.\n", "log_size": 36}
    for _ in range(400):
        time.sleep(0.05)
        yield {"alive": True}


def scripted(**handlers: Handler) -> ScriptedExecutor:
    """Every node idle, starting and serving when asked."""
    return ScriptedExecutor(
        {
            ("*", "cluster_lock"): lambda w: {"ok": True, **({"status": IDLE} if "hold" in w else {})},
            ("*", "rank_status"): lambda w: IDLE,
            ("*", "start"): lambda w: {
                "ok": True,
                "state": {"run_id": "20260101-000000-abcd", "digest": "d1"},
            },
            ("*", "watch"): serving,
            **{("*", key): handler for key, handler in handlers.items()},
        }
    )


@pytest.fixture
def one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Deployments, ScriptedExecutor]:
    """A one-model spec of two nodes, n1 its head, reached through the scripted executor."""
    monkeypatch.setattr("launcher.load.facts_of", lambda files, model, catalog: kind_facts("hybrid", "test"))
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(base_spec("0.32.0", nodes=2)))
    fleet = plan_fleet(path)
    executor = scripted()
    clusters = {d.name: Cluster(d.spec, d.plan, executor) for d in fleet.deployments}
    return Deployments(fleet, clusters, None, True), executor


def test_up_skip_check_sends_the_head_four_commands_and_every_other_node_three(
    one: tuple[Deployments, ScriptedExecutor],
) -> None:
    deployments, executor = one
    done = up_fleet(deployments, {}, SKIP_CHECK, Silent())
    assert list(done.results) == ["t"] and done.results["t"].started
    # the head: the lock taken with what runs there; its start; its watch; the release
    assert executor.keys("n1") == ["cluster_lock", "start", "watch", "cluster_lock"]
    # every other node: what runs there (asked while the lock is taken); its start; its watch
    assert executor.keys("n2") == ["rank_status", "start", "watch"]


def test_the_receipt_rides_with_the_head_s_start_and_with_the_release(
    one: tuple[Deployments, ScriptedExecutor],
) -> None:
    deployments, executor = one
    result = up_fleet(deployments, {}, SKIP_CHECK, Silent()).results["t"]
    path = remote.receipt_path("t", str(result.run_id))
    sent = [
        (n, k, w, json.loads(s or "null"))
        for (n, k, w), s in zip(executor.calls, executor.stdins, strict=True)
    ]
    (head,) = [job for n, k, _, job in sent if (n, k) == ("n1", "start")]
    (other,) = [job for n, k, _, job in sent if (n, k) == ("n2", "start")]
    assert head["keep"]["path"] == path and json.loads(head["keep"]["text"])["outcome"] == "starting"
    assert "keep" not in other and head["argv"] != other["argv"]  # the job itself, on stdin
    (release,) = [(w, text) for n, k, w, text in sent if k == "cluster_lock" and "release" in w]
    assert release[0][-1] == path and release[1]["outcome"] == "started"  # kept, then released


def test_answers_read_before_the_lock_are_not_asked_again_when_nothing_runs() -> None:
    cluster, executor = two_nodes()
    up(cluster, {}, SKIP_CHECK, Silent(), seen={"n1": NodeState.parse(IDLE), "n2": NodeState.parse(IDLE)})
    assert executor.keys("n1") == ["cluster_lock", "start", "watch", "cluster_lock"]
    assert executor.keys("n2") == ["start", "watch"]


def test_every_node_is_asked_again_under_the_lock_when_an_earlier_answer_says_something_runs() -> None:
    cluster, executor = two_nodes()
    with pytest.raises(PlanConflict):
        up(
            cluster,
            {},
            SKIP_CHECK,
            Silent(),
            seen={"n1": NodeState.parse(IDLE), "n2": NodeState.parse(RUNNING)},
        )
    assert executor.keys("n1") == ["cluster_lock", "rank_status", "cluster_lock"]
    assert executor.keys("n2") == ["rank_status"]  # its answer under the lock is the one that counts


def two_nodes() -> tuple[Cluster, ScriptedExecutor]:
    """The same two nodes as a Cluster (as `supervise` starts one); n2 runs another plan."""
    spec = spec_of(base_spec("0.32.0", nodes=2))
    plan = build_plan(spec, kind_facts("hybrid", "test"), catalog_for(spec))
    executor = scripted(rank_status=lambda w: RUNNING if w[-1].endswith("n2") else IDLE)
    return Cluster(spec, plan, executor), executor
