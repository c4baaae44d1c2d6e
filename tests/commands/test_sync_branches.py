"""`sync models`' decisions before any copy, through a scripted FAKE executor (tests/fakes/executor.py).

An incomplete source, a target too small, an identical target, a target the source cannot
reach: each is decided from the nodes' manifests and the source's reach probe, and none
of them prepares, removes or copies anything. The real copies run on the test bed
(tests/e2e/test_sync_models.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from launcher.commands.sync_models import SourceIncomplete, sync_models
from launcher.core.sync.sync_report import sync_json, sync_text
from launcher.core.sync.transfer_plan import CopyProgress
from launcher.errors import ExitStatus, SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import Result
from launcher.operations.copying.sync_options import SyncOptions
from tests.conftest import base_spec, plan_of, spec_of
from tests.fakes.executor import Handler, ScriptedExecutor

MODEL = {
    "config.json": [100, "c" * 64],
    "tokenizer.json": [200, "d" * 64],
    "model-00001-of-00002.safetensors": [400_000_000, "a" * 64],
    "model-00002-of-00002.safetensors": [400_000_000, "b" * 64],
    "model.safetensors.index.json": [300, "e" * 64],
}
INDEX = {
    "model.safetensors.index.json": ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
}


def answer(files: dict[str, list[Any]] | None, free: int = 10**12) -> dict[str, Any]:
    room = {"free": free, "block": 4096, "at": "/models/m", "writable": True, "unwritable": []}
    if files is None:
        return {"ok": True, "path": "/models/m", "exists": False, "room": {**room, "at": "/models"}}
    return {"ok": True, "path": "/models/m", "exists": True, "files": files, "indexes": INDEX, "room": room}


class Collect:
    """A SyncReporter that keeps what it is told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str) -> None:
        self.lines.append(text)

    def progress(self, node: str, progress: CopyProgress) -> None:
        self.lines.append(progress.line(node))


def cluster_with(handlers: dict[tuple[str, str], Handler]) -> tuple[Cluster, ScriptedExecutor]:
    spec = spec_of(base_spec("0.32.0", nodes=2))
    plan = plan_of(base_spec("0.32.0", nodes=2))
    executor = ScriptedExecutor(
        {
            ("n1", "manifest"): lambda w: answer(MODEL),
            ("*", "transfer"): lambda w: {"ok": True, "rsh": "ssh"},
            ("*", "cluster_lock"): lambda w: {"ok": True},
            **handlers,
        }
    )
    return Cluster(spec, plan, executor), executor


def copied_nothing(executor: ScriptedExecutor) -> bool:
    """No prepare, no script kept, no job handed over or rsync run, on any node."""
    return not any(key in ("prepare", "shell") for _, key, _ in executor.calls)


def test_an_incomplete_source_is_refused_naming_what_it_lacks() -> None:
    partial = {k: v for k, v in MODEL.items() if not k.startswith("model-00002")}
    cluster, executor = cluster_with(
        {("n1", "manifest"): lambda w: answer(partial), ("n2", "manifest"): lambda w: answer(None)}
    )
    with pytest.raises(SourceIncomplete) as caught:
        sync_models(cluster, SyncOptions(), Collect())
    assert (
        "missing model-00002-of-00002.safetensors (named in model.safetensors.index.json)"
        in caught.value.message
    )
    assert "--from NODE" in str(caught.value.hint)
    assert copied_nothing(executor)


def test_a_target_too_small_is_refused_before_anything_is_copied() -> None:
    cluster, executor = cluster_with({("n2", "manifest"): lambda w: answer(None, free=100_000_000)})
    result = sync_models(cluster, SyncOptions(), Collect())
    [node] = result.nodes
    assert node.state == "refused" and result.exit_status == ExitStatus.FAILURE
    assert "not enough space on n2: the copy needs 800.0 MB" in node.dirs[0].problems[0]
    assert "/models has 100.0 MB (100000000 bytes) free" in sync_text(result)
    assert copied_nothing(executor)


def test_an_identical_target_is_skipped_without_a_probe_or_the_lock() -> None:
    cluster, executor = cluster_with({("n2", "manifest"): lambda w: answer(dict(MODEL))})
    result = sync_models(cluster, SyncOptions(), Collect())
    assert [n.state for n in result.nodes] == ["identical"] and result.ok
    assert executor.keys("n1") == ["manifest"] and executor.keys("n2") == ["manifest"]


def test_a_target_the_source_cannot_reach_says_how_to_fix_it() -> None:
    refused = {
        "ok": False,
        "rsh": "ssh -o BatchMode=yes",
        "failed": "ssh",
        "error": "Permission denied (publickey).",
    }
    cluster, executor = cluster_with(
        {("n2", "manifest"): lambda w: answer(None), ("n1", "transfer"): lambda w: refused}
    )
    result = sync_models(cluster, SyncOptions(), Collect())
    [node] = result.nodes
    assert node.state == "unreachable" and result.exit_status == ExitStatus.UNREACHABLE
    assert node.detail.startswith("n1 cannot reach n2 at 10.0.0.2 over SSH")
    assert "ssh-copy-id 10.0.0.2" in str(node.hint) and "--relay" in str(node.hint)
    assert copied_nothing(executor)


def test_a_dry_run_lists_what_would_be_copied_and_copies_nothing() -> None:
    partial = {k: v for k, v in MODEL.items() if not k.startswith("model-00002")}
    partial["stale.bin"] = [10, "f" * 64]
    cluster, executor = cluster_with({("n2", "manifest"): lambda w: answer(partial)})
    result = sync_models(cluster, SyncOptions(dry_run=True), Collect())
    assert [n.state for n in result.nodes] == ["would copy"] and result.ok
    text = sync_text(result)
    assert "model /models/m: would send 400.0 MB; 4 files already identical" in text
    assert "missing: model-00002-of-00002.safetensors" in text
    assert "remove (not on the source): stale.bin" in text
    [planned] = json.loads(sync_json(result))["nodes"][0]["dirs"]
    assert planned["transfer"]["send"] == ["model-00002-of-00002.safetensors"]
    assert planned["transfer"]["remove"] == ["stale.bin"] and planned["transfer"]["send_bytes"] == 400_000_000
    assert copied_nothing(executor)


def test_a_missing_rsync_on_the_target_is_named() -> None:
    missing = {"ok": False, "rsh": "ssh", "failed": "remote rsync", "error": "bash: rsync: command not found"}
    cluster, _ = cluster_with(
        {("n2", "manifest"): lambda w: answer(None), ("n1", "transfer"): lambda w: missing}
    )
    [node] = sync_models(cluster, SyncOptions(), Collect()).nodes
    assert node.state == "refused" and node.hint == "install rsync on n2"


def test_from_an_unknown_node_is_refused() -> None:
    cluster, _ = cluster_with({})
    with pytest.raises(SparkLaunchError, match="--from n9: no such node") as caught:
        sync_models(cluster, SyncOptions(source="n9"), Collect())
    assert caught.value.hint == "nodes: n1, n2"


def test_a_failed_copy_is_reported_per_node() -> None:
    """The source's rsync fails: that node failed, with rsync's exit status and its reason."""

    def transfer(words: list[str]) -> dict[str, Any]:
        if words[4] == "send":
            return {"ok": False, "exit": 11, "error": "rsync: write failed: No space left on device (28)"}
        return {"ok": True, "rsh": "ssh"}

    cluster, _ = cluster_with(
        {
            ("n2", "manifest"): lambda w: answer(None),
            ("n1", "transfer"): transfer,
            ("*", "cluster_lock"): lambda w: {"ok": True},
            ("*", "shell"): lambda w: Result("", 0, "", ""),
            ("n2", "prepare"): lambda w: {"ok": True, "removed": 0, "errors": []},
        }
    )
    result = sync_models(cluster, SyncOptions(), Collect())
    [node] = result.nodes
    assert node.state == "failed" and node.detail.startswith("node n2: rsync from n1 failed (exit 11)")
    assert "No space left on device" in node.detail and "continues where it stopped" in str(node.hint)
