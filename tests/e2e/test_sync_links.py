"""`sync models` and `check` on the real test bed with links in model directories: real rsync
between the nodes' sshd, small real files.

As in test_sync_models.py, node2 sees its own directory in place of the models' parent (a bind
mount in node2's mount namespace). A Hugging Face cache snapshot is copied by content; a link
inside a model is copied as a link; a source holding a link out of its model is refused
before anything is copied; a target's link is removed, never followed: what it points to
survives.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BED, cli, spec_file
from tests.e2e.test_sync_models import NODE2, PARENT, check, plan_of, run_bed, sync

pytestmark = pytest.mark.testbed

OUTSIDE = Path("/tmp/spark-launch-sync-outside")  # seen alike by every node: not the model's


@pytest.fixture
def node2_view(testbed: Path) -> Iterator[Path]:
    """The models' parent on the head, and node2's own (empty) view of it; both removed after."""
    for folder in (PARENT, NODE2, OUTSIDE):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    run_bed("bind", "node2", str(NODE2), str(PARENT))
    yield NODE2
    run_bed("unbind", "node2", str(PARENT), check=False)
    for folder in (PARENT, NODE2, OUTSIDE):
        shutil.rmtree(folder, ignore_errors=True)


def small_model(root: Path) -> None:
    root.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json"):  # the tiny model's: the plan reads its config
        shutil.copyfile(BED / "model" / name, root / name)
    (root / "model.safetensors").write_bytes(os.urandom(1 << 20))
    (root / "alias.json").symlink_to("config.json")  # a link inside: kept as a link


def hf_snapshot(parent: Path) -> Path:
    """parent/models--t--m/snapshots/rev/* -> ../../blobs/*, as huggingface_hub lays it out."""
    repo = parent / "hub" / "models--t--m"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for name, data in (
        ("config.json", (BED / "model" / "config.json").read_bytes()),
        ("tokenizer.json", (BED / "model" / "tokenizer.json").read_bytes()),
        ("model.safetensors", os.urandom(1 << 20)),
    ):
        (repo / "blobs" / name.replace(".", "-")).write_bytes(data)
        (snapshot / name).symlink_to(f"../../blobs/{name.replace('.', '-')}")
    return snapshot


def test_a_hugging_face_snapshot_is_copied_by_content_and_then_agrees(
    tmp_path: Path, node2_view: Path
) -> None:
    snapshot = hf_snapshot(PARENT)
    spec = spec_file(tmp_path, model={"path": str(snapshot)})
    code, result = sync(spec)
    assert code == 0 and plan_of(result)["state"] == "copied"
    copy = node2_view / snapshot.relative_to(PARENT)
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        assert not (copy / name).is_symlink() and (copy / name).read_bytes() == (snapshot / name).read_bytes()
    assert check(spec) == (0, {})


def test_a_targets_link_out_is_removed_never_followed_and_a_link_inside_is_kept(
    tmp_path: Path, node2_view: Path
) -> None:
    small_model(PARENT / "small")
    shutil.copytree(PARENT / "small", node2_view / "small", symlinks=True)
    (OUTSIDE / "victim.bin").write_bytes(b"not the model's")
    (node2_view / "small" / "extra").symlink_to(OUTSIDE)  # a directory link out, on the target
    os.mkfifo(node2_view / "small" / "pipe")
    spec = spec_file(tmp_path, model={"path": str(PARENT / "small")})
    code, bad = check(spec)
    assert code == 3 and "model: links and special files" in bad
    code, result = sync(spec)
    planned = plan_of(result)
    assert code == 0 and planned["remove"] == ["extra", "pipe"] and planned["missing"] == []
    assert (OUTSIDE / "victim.bin").read_bytes() == b"not the model's"  # never followed to delete
    assert sorted(os.listdir(node2_view / "small")) == sorted(os.listdir(PARENT / "small"))
    assert os.readlink(node2_view / "small" / "alias.json") == "config.json"
    assert check(spec) == (0, {})


def test_a_source_holding_a_link_out_is_refused_before_anything_is_copied(
    tmp_path: Path, node2_view: Path
) -> None:
    small_model(PARENT / "small")
    (PARENT / "small" / "weights.bin").symlink_to("/etc/hostname")
    spec = spec_file(tmp_path, model={"path": str(PARENT / "small")})
    done = cli("sync", "models", spec, timeout=600)
    assert done.returncode == 1
    assert (
        f"the source node1's model in {PARENT / 'small'} holds what is never copied: weights.bin: "
        "a link pointing outside the model directory (to /etc/hostname)"
    ) in done.stderr
    assert "cp --remove-destination" in done.stderr
    assert list(node2_view.iterdir()) == []  # not one file was written
