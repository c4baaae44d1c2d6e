"""The docker runtime through the real node agent, against a FAKE docker CLI (tests/fakes/docker):
the fast tier's edit loop. The real engines are in tests/e2e/test_containers.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from launcher.commands.logs import logs
from launcher.core.answers.run_answer import Stopped
from launcher.node.cluster import Cluster
from launcher.operations.reporter import Silent
from launcher.operations.running.cluster_status import status
from launcher.operations.running.starting import StartupFailed, UpOptions, up
from launcher.operations.running.stopping import down
from tests.conftest import ROOT, base_spec, free_port, local_cluster
from tests.fakes.local import LocalExecutor

FAKES = ROOT / "tests" / "fakes"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "docker"))
    data = base_spec("0.33.0", nodes=1)
    data["vllm"] = {"version": "0.33.0", "runtime": "docker", "image": "nvcr.io/nvidia/vllm:26.05-py3"}
    data["serve"]["port"] = free_port()
    data["env"] = {"NCCL_DEBUG": "WARN"}
    data["secrets"] = ["HF_TOKEN"]
    return local_cluster(data, tmp_path / "home")


def test_up_status_logs_down_drive_the_container(cluster: Cluster, tmp_path: Path) -> None:
    result = up(
        cluster, {"HF_TOKEN": "sk-fake-secret"}, UpOptions(timeout=60, check=False, grace=2), Silent()
    )
    try:
        assert result.started and result.model == "fake-model"
        record = json.loads((tmp_path / "docker" / f"spark-launch-{cluster.spec.name}.json").read_text())
        assert record["env_file_mode"] == "0o600"
        assert record["env"]["HF_TOKEN"] == "sk-fake-secret" and record["env"]["VLLM_HOST_IP"] == "10.0.0.1"
        assert not any("sk-fake-secret" in a for a in record["argv"])
        assert f"--label=spark-launch.cluster={cluster.spec.name}" in record["argv"]
        assert not list((tmp_path / "home").rglob("node.env")), "the env file outlived docker run"
        assert not list((tmp_path / "home").rglob("run.json"))
        st = status(cluster)
        assert st.state == "running" and st.health == 200 and st.model == "fake-model"
        lines: list[tuple[str, str]] = []
        logs(cluster, ["n1"], 10, False, lambda node, line: lines.append((node, line)))
        assert any(node == "n1" and "Starting vLLM server" in line for node, line in lines)
    finally:
        stopped = down(cluster, 2, Silent())
    assert stopped.per_node["n1"].found == 1 and stopped.clean
    assert (tmp_path / "docker" / f"spark-launch-{cluster.spec.name}.json.removed").exists()
    assert status(cluster).state == "stopped"
    assert down(cluster, 2, Silent()).per_node["n1"].found == 0  # twice is fine
    after: list[str] = []
    logs(cluster, ["n1"], 10, False, lambda _, line: after.append(line))  # the copy saved by down
    assert any("Shutting down" in line for line in after)  # logged while down stopped it


def test_a_container_that_exits_while_loading_is_reported_at_once_with_its_status(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch learns of the end from `docker wait`, not from a `docker inspect` every tick."""
    monkeypatch.setenv("FAKE_DOCKER_FAIL", "RuntimeError: Engine core initialization failed.")
    with pytest.raises(StartupFailed) as caught:
        up(cluster, {"HF_TOKEN": "x"}, UpOptions(timeout=60, check=False, grace=2), Silent())
    assert "n1 (rank 0) exited with status 1" in caught.value.render()
    assert status(cluster).state == "stopped"


def record(cluster: Cluster, tmp_path: Path) -> dict[str, Any]:
    return dict(json.loads((tmp_path / "docker" / f"spark-launch-{cluster.spec.name}.json").read_text()))


def test_down_removes_only_containers_with_our_label(cluster: Cluster, tmp_path: Path) -> None:
    state = tmp_path / "docker"
    state.mkdir()
    stranger = {"pid": os.getpid(), "id": "fake-stranger", "log": "/dev/null", "labels": {"team": "x"}}
    (state / "stranger.json").write_text(json.dumps(stranger))
    up(cluster, {"HF_TOKEN": "x"}, UpOptions(timeout=60, check=False, grace=2, wait=False), Silent())
    stopped = down(cluster, 2, Silent())
    assert stopped.per_node["n1"] == Stopped(
        found=1, remaining=0, groups=1, killed=0, removed=1, containers=True
    )
    assert (state / "stranger.json").exists()


def test_a_container_of_that_name_that_is_not_ours_is_left_alone(cluster: Cluster, tmp_path: Path) -> None:
    state = tmp_path / "docker"
    state.mkdir()
    name = f"spark-launch-{cluster.spec.name}"
    (state / f"{name}.json").write_text(json.dumps({"pid": 999999, "id": "fake-theirs", "log": "/dev/null"}))
    with pytest.raises(StartupFailed) as caught:
        up(cluster, {"HF_TOKEN": "x"}, UpOptions(timeout=60, check=False, grace=2), Silent())
    assert f"a container named {name} that spark-launch did not start exists" in caught.value.message
    assert (state / f"{name}.json").exists()


PLANNED: dict[Path, Cluster] = {}


def engines_cluster(tmp_path: Path, held: dict[str, dict[str, str]]) -> Cluster:
    """A docker-runtime cluster whose nodes hold `held` ({node: {image: id}}) on FAKE engines."""
    node_env = {}
    for name, images in held.items():
        state = tmp_path / f"docker-{name}"
        state.mkdir(exist_ok=True)
        (state / "images.json").write_text(json.dumps(images))
        node_env[name] = {"FAKE_DOCKER_STATE": str(state)}
    if tmp_path not in PLANNED:  # one cluster (one name: the probe's command names it) per test
        data = base_spec("0.33.0", nodes=len(held))
        data["vllm"] = {"version": "0.33.0", "runtime": "docker", "image": IMAGE}
        PLANNED[tmp_path] = local_cluster(data, tmp_path / "home")
    base = PLANNED[tmp_path]
    return Cluster(base.spec, base.plan, LocalExecutor(tmp_path / "home", node_env))


def check_rows(tmp_path: Path, held: dict[str, dict[str, str]], fresh: bool = False) -> dict[str, Any]:
    """check's rows for nodes holding `held` ({node: {image: id}}) on FAKE engines."""
    from launcher.operations.gate import run_check

    return {
        r.item: r
        for r in run_check(engines_cluster(tmp_path, held), probe=True, fresh=fresh, collective=False).rows
    }


def probe_runs(tmp_path: Path, node: str) -> int:
    """How many probe containers the node's FAKE engine has started."""
    runs = tmp_path / f"docker-{node}" / "probe-runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_the_probe_in_the_image_is_answered_from_the_nodes_cache_until_the_image_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    held = {"n1": {IMAGE: "sha256:aaa"}, "n2": {IMAGE: "sha256:aaa"}}
    first = check_rows(tmp_path, held)["answers"]
    assert first.values == {"n1": "resolved now", "n2": "resolved now"}
    again = check_rows(tmp_path, held)["answers"]
    assert again.values == {"n1": "from the node's cache", "n2": "from the node's cache"}
    assert probe_runs(tmp_path, "n1") == probe_runs(tmp_path, "n2") == 1  # no container started again
    rebuilt = check_rows(tmp_path, {"n1": {IMAGE: "sha256:aaa"}, "n2": {IMAGE: "sha256:ccc"}})["answers"]
    assert rebuilt.values["n2"] == "resolved now" and probe_runs(tmp_path, "n2") == 2  # another image id
    assert check_rows(tmp_path, held, fresh=True)["answers"].values["n1"] == "resolved now"
    assert probe_runs(tmp_path, "n1") == 2


IMAGE = "nvcr.io/nvidia/vllm:26.05-py3"


def test_check_fails_a_node_without_the_image_and_one_holding_another_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    rows = check_rows(tmp_path, {"n1": {IMAGE: "sha256:aaa"}, "n2": {}, "n3": {IMAGE: "sha256:bbb"}})
    present = rows[f"image {IMAGE} present"]
    assert present.failed and present.values["n1"] == "aaa" and present.values["n3"] == "bbb"
    assert present.values["n2"] == f"NO: Error response from daemon: No such image: {IMAGE}"
    assert "spark-launch sync images" in str(present.hint)
    assert "image id" not in rows  # nothing to compare yet
    probe = rows["vLLM resolves the command"]  # not run, and said so: no row disappears
    assert probe.failed and probe.values["n2"] == "not run: no vLLM to run here"


def test_check_fails_nodes_holding_another_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    rows = check_rows(tmp_path, {"n1": {IMAGE: "sha256:aaa"}, "n2": {IMAGE: "sha256:bbb"}})
    assert rows["image id"].failed and rows["image id"].values == {"n1": "aaa", "n2": "bbb"}
    assert rows["image repo digest"].failed and "sync images" in str(rows["image id"].hint)
