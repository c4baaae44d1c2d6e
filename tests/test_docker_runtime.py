"""The docker runtime's lifecycle through the real node agent, against a FAKE docker CLI
(tests/fakes/docker): no container engine can run here. One node, on this machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from launcher.commands.down import down
from launcher.commands.logs import logs
from launcher.commands.status import status
from launcher.commands.up import UpOptions, up
from launcher.node.cluster import Cluster, Silent
from launcher.node.executor import LocalExecutor
from tests.conftest import ROOT, base_spec, free_port, local_cluster

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
        lines: list[str] = []
        logs(cluster, ["n1"], 10, False, lines.append)
        assert any("n1 | " in line and "Starting vLLM server" in line for line in lines)
    finally:
        stopped = down(cluster, 2, Silent())
    assert stopped.per_node["n1"]["found"] == 1 and stopped.clean
    assert (tmp_path / "docker" / f"spark-launch-{cluster.spec.name}.json.removed").exists()
    assert status(cluster).state == "stopped"
    assert down(cluster, 2, Silent()).per_node["n1"]["found"] == 0  # twice is fine


def test_check_fails_a_node_without_the_image_and_one_holding_another_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from launcher.commands.check import run_check

    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    image = "nvcr.io/nvidia/vllm:26.05-py3"
    held = {"n1": {image: "sha256:aaa"}, "n2": {}, "n3": {image: "sha256:bbb"}}
    node_env = {}
    for name, images in held.items():
        state = tmp_path / f"docker-{name}"
        state.mkdir()
        (state / "images.json").write_text(json.dumps(images))
        node_env[name] = {"FAKE_DOCKER_STATE": str(state)}
    data = base_spec("0.33.0", nodes=3)
    data["vllm"] = {"version": "0.33.0", "runtime": "docker", "image": image}
    base = local_cluster(data, tmp_path / "home")
    cluster = Cluster(base.spec, base.plan, LocalExecutor(tmp_path / "home", node_env))
    rows = {r.item: r for r in run_check(cluster, probe=True).rows}
    present = rows[f"image {image} present"]
    assert present.failed and present.values == {"n1": "sha256:aaa", "n2": None, "n3": "sha256:bbb"}
    assert rows["image id"].failed
    assert rows["image id"].values == {"n1": "sha256:aaa", "n2": "", "n3": "sha256:bbb"}
