"""`spark-launch sync images` through the real node scripts, node to node (through a FAKE remote
shell, tests/fakes/rsh) or through a local relay, against FAKE docker engines
(tests/fakes/docker): which nodes are copied, skipped or refused, and why. The real engines
and OpenSSH between the bed's nodes are in tests/e2e/test_containers.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from launcher.commands.sync_images import sync_images
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
    unreachable: tuple[str, ...] = (),
    own: dict[str, dict[str, str]] | None = None,
    **env: str,
) -> Cluster:
    """A cluster whose node N has a FAKE engine holding held[N] ({image: id}); the head's remote
    shell reaches every other node by its address, except the `unreachable` ones."""
    fakes = ROOT / "tests" / "fakes"
    monkeypatch.setenv("PATH", f"{fakes}{os.pathsep}{os.environ['PATH']}")
    node_env, hosts = {}, {}
    for index, (name, images) in enumerate(held.items()):
        state = tmp_path / f"docker-{name}"
        state.mkdir()
        (state / "images.json").write_text(json.dumps(images))
        node_env[name] = {"FAKE_DOCKER_STATE": str(state), **env, **(own or {}).get(name, {})}
        if name not in unreachable:
            hosts[f"10.0.0.{index + 1}"] = node_env[name]
    first = next(iter(held))
    node_env[first] |= {"RSYNC_RSH": str(fakes / "rsh"), "FAKE_RSH_HOSTS": json.dumps(hosts)}
    data = base_spec("0.33.0", nodes=len(held))
    data["vllm"] = {"version": "0.33.0", "runtime": "docker", "image": image}
    base = local_cluster(data, tmp_path / "home")
    return Cluster(base.spec, base.plan, LocalExecutor(tmp_path / "home", node_env))


def holds(tmp_path: Path, node: str) -> dict[str, str]:
    return dict(json.loads((tmp_path / f"docker-{node}" / "images.json").read_text()))


@pytest.mark.parametrize("relay", [False, True], ids=["node-to-node", "relayed"])
def test_a_node_lacking_the_image_gets_the_heads_and_a_node_holding_it_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relay: bool
) -> None:
    cluster = engines(
        tmp_path, monkeypatch, {"n1": {IMAGE: "sha256:aaa"}, "n2": {}, "n3": {IMAGE: "sha256:aaa"}}
    )
    said = Lines()
    result = sync_images(cluster, said, relay=relay)
    assert result.ok and result.image_id == "sha256:aaa"
    actions = {n.name: (n.action, n.detail) for n in result.nodes}
    assert actions["n1"][0] == "head" and actions["n3"] == ("skipped", "already holds it (same image id)")
    assert actions["n2"][0] == "copied" and "image id now matches" in actions["n2"][1]
    assert holds(tmp_path, "n2") == {IMAGE: "sha256:aaa"}
    how = "through this machine" if relay else "node to node"
    assert f"copying {IMAGE} (0.0 GB) from n1 to n2 ({how})" in said.lines
    assert result.nodes[1].bytes > 3000  # what the FAKE save wrote: the archive's header and body


@pytest.mark.parametrize("relay", [False, True], ids=["node-to-node", "relayed"])
def test_a_node_holding_another_build_under_the_name_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relay: bool
) -> None:
    held = {"n1": {IMAGE: "sha256:aaa"}, "n2": {IMAGE: "sha256:bbb"}, "n3": {}}
    cluster = engines(tmp_path, monkeypatch, held)
    result = sync_images(cluster, Lines(), relay=relay)
    assert [(n.name, n.action) for n in result.nodes] == [("n1", "head"), ("n2", "copied"), ("n3", "copied")]
    assert holds(tmp_path, "n2") == holds(tmp_path, "n3") == {IMAGE: "sha256:aaa"}


def test_a_target_the_head_cannot_reach_is_named_with_the_fix_and_the_others_are_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held: dict[str, dict[str, str]] = {"n1": {IMAGE: "sha256:aaa"}, "n2": {}, "n3": {}}
    cluster = engines(tmp_path, monkeypatch, held, unreachable=("n2",))
    result = sync_images(cluster, Lines())
    actions = {n.name: (n.action, n.detail) for n in result.nodes}
    assert not result.ok and actions["n3"][0] == "copied"
    assert actions["n2"][0] == "failed" and "n1 cannot reach n2 at 10.0.0.2 over SSH" in actions["n2"][1]
    assert "No route to host" in actions["n2"][1]
    assert "ssh-copy-id 10.0.0.2" in actions["n2"][1] and "--relay" in actions["n2"][1]
    assert holds(tmp_path, "n2") == {}  # nothing was sent to it


def test_a_load_that_fails_on_the_target_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk_full = {"FAKE_DOCKER_LOAD_ERROR": "Error processing tar file: no space left on device"}
    cluster = engines(tmp_path, monkeypatch, {"n1": {IMAGE: "sha256:aaa"}, "n2": {}}, own={"n2": disk_full})
    result = sync_images(cluster, Lines())
    (n2,) = [n for n in result.nodes if n.name == "n2"]
    assert n2.action == "failed" and n2.detail.startswith("docker load failed (exit 1)")
    assert "no space left on device" in n2.detail


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
