"""Receipts, diff, the lock file and the upgrade preview: the pure core, then the commands over a
FAKE vLLM on this machine (the real bed: tests/e2e)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from launcher.catalogs import load_catalog
from launcher.commands.diff import compare, pick
from launcher.core.answers.facts_answer import Facts
from launcher.core.answers.facts_answer import facts as read_facts
from launcher.core.answers.sync_answer import manifest
from launcher.core.plan import build_plan
from launcher.core.receipts.content import SECRET, new_receipt, node_inputs, snapshot
from launcher.core.receipts.lockfile import Lock, LockError, drift, entries, lock_text, parse_lock
from launcher.core.receipts.run_diff import diff, diff_text
from launcher.core.receipts.upgrade import compare_release, comparison_text
from launcher.core.rules.base import Sharing
from launcher.core.vllm.models import kind_facts
from launcher.load import catalog_for
from launcher.node.cluster import Cluster
from launcher.operations.drift import LockDrift
from launcher.operations.receipt_store import bundle_files, load_all, runs_dir
from launcher.operations.reporter import Silent
from launcher.operations.running.starting import StartupFailed, UpOptions, up
from launcher.operations.running.stopping import down
from tests.conftest import ROOT, base_spec, fake_vllm_cluster, plan_of, spec_of
from tests.core.answers.test_node_answers import HOST_DETAILS
from tests.fakes.executor import ScriptedExecutor
from tests.invoke import invoke

SHA = {"config.json": "a" * 64, "model-00001.safetensors": "b" * 64}
PLANTED = "planted-secret-value-93e1"


def facts_answer(kernel: str = "6.8.0-1", env: dict[str, str] | None = None) -> dict[str, Any]:
    """One node's facts script answer."""
    return {
        "ok": True,
        "ours_running": False,
        "vllm": {
            "vllm_version": "0.32.0+cu130",
            "vllm_commit": "abc123",
            "vllm_build": "f00d",
            "python_version": "3.12.3",
        },
        "env": env if env is not None else {"NCCL_DEBUG": "WARN", "HF_TOKEN": "sha256:1234"},
        "network": {"interface_exists": True, "addresses": [], "holds_address": True, "ports_free": {}},
        "host": {
            "kernel": kernel,
            "os": "Ubuntu 24.04",
            "gpus": ["NVIDIA GB10, 122880 MiB, 1000 MiB, 580.95"],
        },
        "host_details": {**HOST_DETAILS, "kernel": kernel},
        "tools": {"py_spy": None, "ptrace": "root", "ptrace_ok": True},
        "memory": {"meminfo": {}, "gpus": None, "model_config": None},
    }


def manifest_answer(files: dict[str, str] | None = None) -> dict[str, Any]:
    """One node's manifest script answer for /models/m."""
    return {
        "ok": True,
        "path": "/models/m",
        "exists": True,
        "files": {k: [10, v] for k, v in (files or SHA).items()},
    }


def facts(
    kernel: str = "6.8.0-1", files: dict[str, str] | None = None, env: dict[str, str] | None = None
) -> Facts:
    """One node's facts as `check` gathers them (read by the agent's parsers)."""
    found = read_facts(facts_answer(kernel, env))
    found["models"] = {"/models/m": manifest(manifest_answer(files), "/models/m")}
    return found


def two_node_snapshot(data: dict[str, Any], **node2: Any) -> dict[str, Any]:
    spec = spec_of(data)
    plan = plan_of(data)
    return snapshot(spec, plan, {"n1": facts(), "n2": facts(**node2)})


def test_a_receipt_keeps_names_and_value_hashes_and_secrets_by_name_only() -> None:
    data = {**base_spec(), "env": {"VLLM_LOGGING_LEVEL": "DEBUG"}, "secrets": ["VLLM_API_KEY"]}
    spec, plan = spec_of(data), plan_of(data)
    receipt = new_receipt(spec, plan, "r1", "t0", {"n1": facts(), "n2": facts()}, None)
    env = receipt["nodes"]["n1"]["env"]
    assert env["VLLM_API_KEY"] == SECRET and env["HF_TOKEN"] == SECRET  # secret-looking, inherited too
    assert env["VLLM_LOGGING_LEVEL"].startswith("sha256:") and '"DEBUG"' not in json.dumps(receipt)
    assert receipt["nodes"]["n1"]["vllm"] == {
        "release": "0.32.0+cu130", "commit": "abc123", "build": "f00d", "python": "3.12.3", "torch": None,
    }  # fmt: skip
    assert receipt["nodes"]["n1"]["host"] == {
        "kernel": "6.8.0-1",
        "os": "Ubuntu 24.04",
        "gpus": ["NVIDIA GB10, 122880 MiB"],
        "driver": "580.95",
    }  # fmt: skip  (the memory in use is not a host fact: it moves all the time)
    assert receipt["nodes"]["n2"]["models"]["model"]["files"] == SHA
    assert receipt["outcome"] == "starting" and receipt["check"] is None


def test_without_the_nodes_facts_a_receipt_keeps_what_the_plan_decides() -> None:
    spec, plan = spec_of(base_spec()), plan_of(base_spec())
    inputs = node_inputs(spec, plan.nodes[1], None)
    assert set(inputs) == {"rank", "argv", "env"} and inputs["argv"][-1] == "--headless"


def test_diff_names_the_one_variable_that_changed_once_for_every_node() -> None:
    a = two_node_snapshot({**base_spec(), "env": {"VLLM_X": "1"}})
    b = two_node_snapshot({**base_spec(), "env": {"VLLM_X": "2"}})
    changes = diff(a, b)
    assert {(c.node, c.area, c.item) for c in changes} == {
        (None, "plan", "digest"), ("n1", "env", "VLLM_X"), ("n2", "env", "VLLM_X")
    }  # fmt: skip
    text = diff_text("t: a -> b", changes, ["n1", "n2"])
    assert "every node   env    VLLM_X: sha256:" in text and text.count("VLLM_X") == 1


def test_diff_names_argv_words_model_files_and_host_facts() -> None:
    a = two_node_snapshot(base_spec())
    b = two_node_snapshot(
        {**base_spec(), "serve": {**base_spec()["serve"], "max_model_len": 8192}},
        kernel="6.8.0-2",
        files={**SHA, "model-00001.safetensors": "c" * 64},
    )
    said = {(c.node, c.area, c.item, c.before, c.after) for c in diff(a, b)}
    assert (
        "n2",
        "model",
        "model file model-00001.safetensors",
        "sha256 bbbbbbbbbbbb",
        "sha256 cccccccccccc",
    ) in said
    assert ("n2", "host", "kernel", "6.8.0-1", "6.8.0-2") in said
    assert any(
        c[1] == "argv" and c[3] == "--max-model-len=4096" and c[4] == "--max-model-len=8192" for c in said
    )
    assert not any(c[0] == "n1" and c[1] in ("model", "host") for c in said)


def test_the_lock_file_is_stable_reads_back_and_quotes_what_would_not() -> None:
    inputs = two_node_snapshot(base_spec())["nodes"]
    odd = {**entries(inputs["n1"]), "model.file dir/a = b.json": "x", "host.os": ' "quoted" '}
    nodes = {"n1": dict(sorted(odd.items())), "n2": entries(inputs["n2"])}
    text = lock_text(nodes, "t")
    assert text == lock_text(copy.deepcopy(nodes), "t")  # the same inputs, the same bytes
    assert parse_lock(text, "t.yaml.lock").nodes == nodes
    assert list(parse_lock(text, "t.yaml.lock").nodes["n1"]) == sorted(nodes["n1"])  # in sorted order
    assert "model.file config.json = " + "a" * 64 in text
    assert '"model.file dir/a = b.json" = x' in text


def test_a_line_the_lock_cannot_read_is_named_with_its_file_and_line() -> None:
    with pytest.raises(LockError) as caught:
        parse_lock("# header\n[n1]\nvllm.build f00d\n", "c.yaml.lock")
    assert caught.value.message == "c.yaml.lock:3: cannot read 'vllm.build f00d'"
    with pytest.raises(LockError):
        parse_lock("vllm.build = f00d\n", "c.yaml.lock")  # before any [node]


def test_drift_names_the_models_file_the_build_and_the_kernel() -> None:
    locked = {"n1": entries(two_node_snapshot(base_spec())["nodes"]["n1"])}
    moved = copy.deepcopy(locked)
    moved["n1"]["model.file config.json"] = "d" * 64
    moved["n1"]["vllm.build"] = "beef"
    moved["n1"]["host.kernel"] = "6.9.0"
    found = [d.text() for d in drift(locked, moved)]
    assert found == [
        "n1: host kernel: 6.8.0-1 in the lock, 6.9.0 now".replace("host kernel", "kernel"),
        f"n1: model file config.json: {'a' * 64} in the lock, {'d' * 64} now",
        "n1: vLLM build (fingerprint of its files): f00d in the lock, beef now",
    ]
    assert [d.text() for d in drift(locked, {**moved, "n3": {}})][
        -1
    ] == "n3: the node: (not locked) in the lock, in the spec now"


def preview(data: dict[str, Any], to: str, kind: str | None = "hybrid") -> str:
    spec = spec_of(data)
    new = load_catalog(to)
    return comparison_text(
        compare_release(
            spec, plan_of(data, kind), catalog_for(spec), new, kind_facts(kind, "test"), Sharing()
        )
    )


def test_moving_032_to_033_names_the_mamba_cache_mode_change_from_both_catalogs() -> None:
    text = preview(base_spec("0.32.0"), "0.33.0")
    assert "vLLM 0.32.0 -> 0.33.0" in text
    assert (
        "flags deprecated:\n  --mamba-cache-mode (pinned by the plan): live -> "
        "--mamba-cache-mode is deprecated" in text
    )
    assert "mamba_cache_mode: align (--mamba-cache-mode=align) -> align (implied, no flag)" in text
    assert "every node: - --mamba-cache-mode=align" in text
    explicit = preview(
        {**base_spec("0.32.0"), "serve": {**base_spec()["serve"], "mamba_cache_mode": "align"}}, "0.33.0"
    )
    assert "--mamba-cache-mode (serve.mamba_cache_mode): live -> " in explicit
    assert "derived settings that change (set in the spec):\n  mamba_cache_mode:" in explicit
    assert "serve.mamba_cache_mode dropped: a deprecated no-op in vLLM 0.33.0 (it agrees)" in explicit


def test_moving_back_names_a_removed_flag_and_the_negative_form_that_changes() -> None:
    data = base_spec("0.33.0")
    data["serve"] = {**data["serve"], "enable_prefix_caching": False, "watchdog_config": {"enabled": False}}
    text = preview(data, "0.32.0")
    assert "flags removed:\n  --watchdog-config (serve.watchdog_config): live -> not an option" in text
    assert (
        "refused by the new release" in text and "serve.watchdog_config: is not a `vllm serve` option" in text
    )
    del data["serve"]["watchdog_config"]
    text = preview(data, "0.32.0")
    assert "every node: --disable-prefix-caching -> --no-enable-prefix-caching" in text
    assert "mamba_cache_mode: none (implied, no flag) -> none (--mamba-cache-mode=none)" in text


def test_plan_compare_release_on_the_032_example_and_an_unknown_release() -> None:
    spec = str(ROOT / "configs" / "qwen3-next-2x-spark-v032.yaml")
    done = invoke(["plan", spec, "--compare-release", "0.33.0"])
    assert done.exit_code == 0, done.output
    assert (
        "--mamba-cache-mode (serve.mamba_cache_mode): live -> --mamba-cache-mode is deprecated" in done.output
    )
    as_json = json.loads(invoke(["plan", spec, "--compare-release", "0.33.0", "--json"]).output)
    assert {"kind": "argv", "item": "- --mamba-cache-mode=align", "before": "--mamba-cache-mode=align",
            "after": None, "node": "every node"} in as_json["changes"]  # fmt: skip


# -- the commands, on this machine, with the FAKE vllm --


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return fake_vllm_cluster(tmp_path, monkeypatch)


def with_env(cluster: Cluster, env: dict[str, str]) -> Cluster:
    spec = spec_of({**_data(cluster), "env": env})
    return Cluster(spec, build_plan(spec, kind_facts("hybrid", "test"), catalog_for(spec)), cluster.executor)


def _data(cluster: Cluster) -> dict[str, Any]:
    data = base_spec()
    data.update(name=cluster.spec.name, secrets=list(cluster.spec.secrets))
    data["vllm"]["venv"] = cluster.spec.vllm.venv
    data["serve"]["port"] = cluster.plan.api_port
    data["api"] = {"listen": "loopback"}  # where the fake listens, as the cluster's own spec says
    return data


def test_two_runs_are_listed_and_diff_names_the_variable_that_changed(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = with_env(cluster, {"VLLM_CPU_KVCACHE_SPACE": "1"})
    second = with_env(cluster, {"VLLM_CPU_KVCACHE_SPACE": "2"})
    try:
        up(first, {}, UpOptions(timeout=60, check=False, grace=1), Silent())
        up(second, {}, UpOptions(timeout=60, check=False, grace=1, replace=True), Silent())
    finally:
        down(second, 1, Silent())
    kept = load_all(cluster.spec.name)
    assert [r["outcome"] for r in kept] == ["served", "served"]
    head = cluster.executor.home / ".spark-launch" / cluster.spec.name / "runs"  # type: ignore[attr-defined]
    assert sorted(p.stem for p in head.glob("*.json")) == [r["run_id"] for r in kept]  # and on the head
    changes = compare(pick(cluster.spec.name, [], lambda: {}))
    name = "VLLM_CPU_KVCACHE_SPACE"
    assert {(c.node, c.area, c.item) for c in changes} == {
        (None, "plan", "digest"), ("n1", "env", name), ("n2", "env", name)
    }  # fmt: skip


def test_a_rank_that_dies_leaves_a_failed_receipt_with_the_evidence_taken_before_the_stop(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_FAIL", f"RuntimeError: the engine died {PLANTED}")
    with pytest.raises(StartupFailed):
        up(cluster, {"X": PLANTED}, UpOptions(timeout=60, check=False, grace=1), Silent())
    (receipt,) = load_all(cluster.spec.name)
    assert receipt["outcome"] == "failed" and receipt["detail"].startswith("n1 (rank 0) exited with status 1")
    (evidence,) = receipt["evidence"]
    assert "the engine died <redacted>" in evidence["nodes"]["n1"]["texts"]["log-tail.txt"]
    assert PLANTED not in json.dumps(receipt)
    kept = runs_dir(cluster.spec.name) / receipt["run_id"] / "evidence"
    assert {"n1-log-tail.txt", "n2-log-tail.txt"} <= {p.name for p in kept.rglob("*.txt")}
    bundled = bundle_files(cluster.spec.name)  # what `diagnose` adds to its bundle
    assert f"receipts/{receipt['run_id']}.json" in bundled
    assert any(
        k.startswith(f"receipts/{receipt['run_id']}/evidence/") and k.endswith("n1-log-tail.txt")
        for k in bundled
    )


def test_up_locked_refuses_a_node_that_moved_before_anything_starts(tmp_path: Path) -> None:
    spec = spec_of(base_spec())
    plan = build_plan(spec, kind_facts("hybrid", "test"), catalog_for(spec))
    files = {"n1": SHA, "n2": {**SHA, "config.json": "e" * 64}}
    executor = ScriptedExecutor(
        {
            ("*", "cluster_lock"): lambda w: {"ok": True},
            ("*", "rank_status"): lambda w: {"ok": True, "alive": False, "processes": 0, "state": None},
            ("*", "check_facts"): lambda w: {  # one call: the facts with the model's manifest
                **facts_answer(),
                "models": {"/models/m": manifest_answer(files[w[3].rsplit("/", 1)[-1]])},
            },
        }
    )
    cluster = Cluster(spec, plan, executor)
    locked = {
        n: entries(node_inputs(spec, c, facts())) for n, c in zip(["n1", "n2"], plan.nodes, strict=True)
    }
    with pytest.raises(LockDrift) as caught:
        up(cluster, {}, UpOptions(check=False, locked=Lock("t.yaml.lock", locked)), Silent())
    assert caught.value.message == (
        "the nodes differ from t.yaml.lock: nothing was started\n"
        f"  n2: model file config.json: {'a' * 64} in the lock, {'e' * 64} now"
    )
    assert "start" not in executor.keys("n1") + executor.keys("n2") and load_all(spec.name) == []
