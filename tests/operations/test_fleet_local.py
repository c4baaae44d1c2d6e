"""Two deployments through the real node agent on this machine, with a FAKE `vllm`
(tests/fakes/vllm): up of both, down of one leaving the other's processes untouched, and a
supervisor per deployment restarting only the one whose rank died. The real thing (real vLLM,
the endpoint) is tests/e2e/test_deployments.py."""

from __future__ import annotations

import _thread
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from launcher.commands.down import down_fleet
from launcher.commands.supervise import supervise_fleet
from launcher.commands.up import up_fleet
from launcher.core.serving.supervision import Event, RestartPolicy
from launcher.core.vllm.models import kind_facts
from launcher.load import plan_fleet
from launcher.node.cluster import Cluster
from launcher.operations.fleet import Deployments
from launcher.operations.reporter import Silent
from launcher.operations.running.cluster_status import status
from launcher.operations.running.starting import UpOptions
from launcher.operations.running.supervising import SuperviseOptions
from tests.conftest import ROOT, base_spec, free_port
from tests.fakes.local import LocalExecutor

OPTIONS = UpOptions(timeout=60, check=False, grace=1)


@pytest.fixture
def deployments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployments]:
    """big on n1 and n2, small on n2 alone; every node is this machine, `vllm` the fake one."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "vllm").symlink_to(ROOT / "tests" / "fakes" / "vllm")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("launcher.load.facts_of", lambda files, model, catalog: kind_facts("hybrid", "test"))
    data = base_spec("0.32.0", nodes=2)
    data["name"] = f"fleet-{os.getpid()}"  # processes are ours by a machine-wide marker
    data["vllm"]["venv"] = str(venv)
    serve = data.pop("serve")
    model = data.pop("model")
    data["deployments"] = [
        {"name": "big", "nodes": ["n1", "n2"], "model": model, "serve": {**serve, "port": free_port()}},
        {
            "name": "small",
            "nodes": ["n2"],
            "model": {"path": "/models/s", "served_name": "s"},
            "serve": {**serve, "tensor_parallel_size": 1, "port": free_port()},
        },
    ]
    path = tmp_path / "multi.yaml"
    path.write_text(yaml.safe_dump(data))
    fleet = plan_fleet(path)
    (tmp_path / "home").mkdir()
    executor = LocalExecutor(tmp_path / "home")
    clusters = {d.name: Cluster(d.spec, d.plan, executor) for d in fleet.deployments}
    chosen = Deployments(fleet, clusters, None, True)
    yield chosen
    down_fleet(chosen, 1, Silent())


def pids(cluster: Cluster) -> dict[str, int | None]:
    return {n.name: n.pid for n in status(cluster, deadline=None).nodes}


def test_down_of_one_deployment_leaves_the_others_processes_untouched(deployments: Deployments) -> None:
    started = up_fleet(deployments, {}, OPTIONS, Silent())
    assert set(started.results) == {"big", "small"} and not started.failed
    big, small = deployments.clusters["big"], deployments.clusters["small"]
    assert [n.name for n in small.plan.nodes] == ["n2"] and small.plan.master_port is None
    before = pids(big)
    only = Deployments(deployments.fleet, {"small": small}, None, False)
    down_fleet(only, 1, Silent())
    assert status(small, deadline=None).state == "stopped"
    assert status(big, deadline=None).state == "running" and pids(big) == before
    down_fleet(deployments, 1, Silent())
    assert status(big, deadline=None).state == "stopped"


def kill_rank(cluster: Cluster, node: str) -> None:
    home = cluster.executor.home  # type: ignore[attr-defined]
    state = json.loads((home / ".spark-launch" / cluster.spec.name / node / "state.json").read_text())
    os.killpg(state["pgid"], signal.SIGKILL)


def test_a_dead_rank_restarts_only_its_own_deployment(deployments: Deployments) -> None:
    big, small = deployments.clusters["big"], deployments.clusters["small"]
    events: list[Event] = []
    runs: dict[str, set[str | None]] = {}

    def emit(event: Event) -> None:
        events.append(event)
        if event.what != "serving":
            return
        serving = [e.cluster for e in events if e.what == "serving"]
        if len(serving) == 2:  # both serve: the small one's only rank dies
            runs["big"] = {n.run_id for n in status(big, deadline=None).nodes}
            threading.Timer(0.3, kill_rank, (small, "n2")).start()
        elif len(serving) == 3:  # the small one again: stop the supervisor as Ctrl-C would
            runs["big after"] = {n.run_id for n in status(big, deadline=None).nodes}
            threading.Timer(0.3, _thread.interrupt_main).start()

    policy = RestartPolicy(limit=3, window=600, backoff=0.2, max_backoff=1)
    guard = threading.Timer(120, _thread.interrupt_main)  # a restart that never serves fails, not hangs
    guard.start()
    try:
        stopped = supervise_fleet(deployments, {}, SuperviseOptions(policy, 30, 2.0, OPTIONS), emit, Silent())
    finally:
        guard.cancel()
    said = [(e.cluster, e.node, e.what, e.why) for e in events]
    assert "big after" in runs, f"the small deployment did not serve again within 120 s: {said}"
    died = [e for e in events if e.what == "rank exited"]
    assert [(e.cluster, e.node) for e in died] == [(small.spec.name, "n2")]
    assert [e.cluster for e in events if e.what == "serving"][-1] == small.spec.name
    assert runs["big"] == runs["big after"]  # the big one was never restarted
    assert stopped.why == "interrupted"
    assert status(big, deadline=None).state == status(small, deadline=None).state == "stopped"
