"""`spark-launch sync images` through the real node scripts and a local relay, against FAKE docker
engines (tests/fakes/docker): which nodes are copied, skipped or refused, and why. The real
engines are in tests/e2e/test_containers.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from launcher.commands.sync.images import sync_images
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from tests.conftest import ROOT, base_spec, local_cluster
from tests.fakes.local import LocalExecutor

IMAGE = "nvcr.io/nvidia/vllm:26.05-py3"


class Lines:
    """A Reporter keeping what it is told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str) -> None:
        self.lines.append(text)

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Not used by sync."""


def engines(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    held: dict[str, dict[str, str]],
    image: str = IMAGE,
    **env: str,
) -> Cluster:
    """A cluster whose node N has a FAKE engine holding held[N] ({image: id})."""
    monkeypatch.setenv("PATH", f"{ROOT / 'tests' / 'fakes'}{os.pathsep}{os.environ['PATH']}")
    node_env = {}
    for name, images in held.items():
        state = tmp_path / f"docker-{name}"
        state.mkdir()
        (state / "images.json").write_text(json.dumps(images))
        node_env[name] = {"FAKE_DOCKER_STATE": str(state), **env}
    data = base_spec("0.33.0", nodes=len(held))
    data["vllm"] = {"version": "0.33.0", "runtime": "docker", "image": image}
    base = local_cluster(data, tmp_path / "home")
    return Cluster(base.spec, base.plan, LocalExecutor(tmp_path / "home", node_env))


def holds(tmp_path: Path, node: str) -> dict[str, str]:
    return dict(json.loads((tmp_path / f"docker-{node}" / "images.json").read_text()))


def test_a_node_lacking_the_image_gets_the_heads_and_a_node_holding_it_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = engines(
        tmp_path, monkeypatch, {"n1": {IMAGE: "sha256:aaa"}, "n2": {}, "n3": {IMAGE: "sha256:aaa"}}
    )
    said = Lines()
    result = sync_images(cluster, said)
    assert result.ok and result.image_id == "sha256:aaa"
    actions = {n.name: (n.action, n.detail) for n in result.nodes}
    assert actions["n1"][0] == "head" and actions["n3"] == ("skipped", "already holds it (same image id)")
    assert actions["n2"][0] == "copied" and "image id now matches" in actions["n2"][1]
    assert holds(tmp_path, "n2") == {IMAGE: "sha256:aaa"}
    assert f"copying {IMAGE} (0.0 GB) from n1 to n2" in said.lines


def test_a_node_holding_another_build_under_the_name_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = engines(tmp_path, monkeypatch, {"n1": {IMAGE: "sha256:aaa"}, "n2": {IMAGE: "sha256:bbb"}})
    result = sync_images(cluster, Lines())
    assert [(n.name, n.action) for n in result.nodes] == [("n1", "head"), ("n2", "copied")]
    assert holds(tmp_path, "n2") == {IMAGE: "sha256:aaa"}


def test_a_node_short_of_space_is_refused_before_copying_with_the_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    huge = str(10**15)  # a 1 PB image: no node has twice that free
    cluster = engines(
        tmp_path, monkeypatch, {"n1": {IMAGE: "sha256:aaa"}, "n2": {}}, FAKE_DOCKER_IMAGE_SIZE=huge
    )
    result = sync_images(cluster, Lines())
    (n2,) = [n for n in result.nodes if n.name == "n2"]
    assert not result.ok and n2.action == "refused"
    assert "GB free in" in n2.detail and "but loading 1000000.0 GB needs about 2000000.0 GB" in n2.detail
    assert holds(tmp_path, "n2") == {}  # nothing was copied


@pytest.mark.parametrize(
    ("held", "image", "words"),
    [
        ({"n1": {}, "n2": {}}, IMAGE, "the head (n1) does not hold"),
        ({"n1": {}, "n2": {}}, IMAGE + "@sha256:" + "0" * 64, "pinned by digest"),
    ],
    ids=["head-lacks-it", "digest-pinned"],
)
def test_sync_refuses_what_it_cannot_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: dict[str, dict[str, str]], image: str, words: str
) -> None:
    cluster = engines(tmp_path, monkeypatch, held, image=image)
    with pytest.raises(SparkLaunchError) as caught:
        sync_images(cluster, Lines())
    assert words in caught.value.message and caught.value.hint


def test_sync_images_is_for_the_docker_runtime(tmp_path: Path) -> None:
    cluster = local_cluster(base_spec(), tmp_path / "home")
    with pytest.raises(SparkLaunchError) as caught:
        sync_images(cluster, Lines())
    assert "for the docker runtime" in caught.value.message
