"""check's comparisons, from node facts as the agent reports them: what passes, what fails."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from launcher.catalogs import load_catalog
from launcher.core.answers.sync_answer import manifest
from launcher.core.checks import AGREE, env_rows, model_rows, network_rows, probe_rows, vllm_rows
from launcher.core.plan import Plan
from launcher.core.spec.sections import Spec
from tests.conftest import base_spec, plan_of, spec_of


def plan_and_spec(version: str = "0.32.0") -> tuple[Spec, Plan]:
    return spec_of(base_spec(version)), plan_of(base_spec(version))


def node_facts(**overrides: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "ours_running": False,
        "vllm": {
            "vllm_binary": True,
            "vllm_version": "0.32.0",
            "vllm_build": "b1",
            "vllm_commit": None,
            "vllm_distribution": "vllm",
            "python_version": "3.12.3",
            "torch_version": "2.9.0",
        },
        "models": {
            "/models/m": {
                "path": "/models/m",
                "exists": True,
                "files": {
                    "config.json": [100, "c" * 64],
                    "tokenizer.json": [200, "9" * 64],
                    "model-00001-of-00002.safetensors": [10 << 20, "a" * 64],
                    "model-00002-of-00002.safetensors": [10 << 20, "b" * 64],
                    "model.safetensors.index.json": [300, "8" * 64],
                },
                "indexes": {
                    "model.safetensors.index.json": [
                        "model-00001-of-00002.safetensors",
                        "model-00002-of-00002.safetensors",
                    ]
                },
            }
        },
        "model": {"weight_bytes": 20 << 20},
        "env": {"VLLM_USE_V2_MODEL_RUNNER": "0", "HF_HOME": "/hf"},
        "network": {
            "interface_exists": True,
            "addresses": ["10.0.0.1"],
            "holds_address": True,
            "ports_free": {"8000": True, "29501": True},
        },
        "host": {"gpus": ["NVIDIA GB10"], "MemAvailable": 100 << 30},
    }
    for dotted, value in overrides.items():
        section, key = dotted.split("__")
        facts[section][key] = value
    return facts


def read(facts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The facts with their manifests as the agent reads them (strictly, into Manifests)."""
    return {
        n: {**f, "models": {path: manifest({"ok": True, **m}, path) for path, m in f["models"].items()}}
        for n, f in facts.items()
    }


def failed(rows: list[Any]) -> dict[str, dict[str, Any]]:
    return {r.item: r.values for r in rows if r.failed}


def test_alike_nodes_pass_every_row() -> None:
    spec, plan = plan_and_spec()
    facts = {"n1": node_facts(), "n2": node_facts()}
    rows = vllm_rows(spec, facts) + model_rows(spec, read(facts)) + env_rows(plan, facts)
    rows += network_rows(spec, plan, facts, {"n2": "yes"})
    assert failed(rows) == {}


@pytest.mark.parametrize(
    ("override", "item"),
    [
        ({"vllm__vllm_version": "0.33.0"}, "vllm version"),
        ({"vllm__vllm_build": "b2"}, "vllm build (files)"),
        ({"vllm__vllm_binary": False}, "vllm binary"),
        ({"vllm__torch_version": "2.10.0"}, "torch"),
    ],
)
def test_a_different_vllm_install_fails(override: dict[str, Any], item: str) -> None:
    spec, _ = plan_and_spec()
    rows = vllm_rows(spec, {"n1": node_facts(), "n2": node_facts(**override)})
    assert item in failed(rows)


def test_both_nodes_on_another_release_than_the_spec_fail() -> None:
    spec, _ = plan_and_spec()
    other = node_facts(vllm__vllm_version="0.31.0")
    assert "vllm version" in failed(vllm_rows(spec, {"n1": other, "n2": copy.deepcopy(other)}))


def model_of(facts: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = facts["models"]["/models/m"]
    return answer


@pytest.mark.parametrize("name", ["config.json", "model-00002-of-00002.safetensors"])
def test_a_file_of_the_same_size_but_other_bytes_fails_naming_it(name: str) -> None:
    spec, _ = plan_and_spec()
    changed = node_facts()
    size = model_of(changed)["files"][name][0]
    model_of(changed)["files"][name] = [size, "d" * 64]
    rows = failed(model_rows(spec, read({"n1": node_facts(), "n2": changed})))
    assert list(rows) == [name]
    assert rows[name]["n1"].startswith(model_of(node_facts())["files"][name][1][:12])
    assert rows[name]["n2"].startswith("d" * 12)


def test_a_missing_model_or_shard_fails() -> None:
    spec, _ = plan_and_spec()
    gone = node_facts()
    model_of(gone).update(exists=False, files={})
    missing = failed(model_rows(spec, read({"n1": node_facts(), "n2": gone})))
    assert missing == {"/models/m exists": {"n1": True, "n2": False}}
    partial = node_facts()
    del model_of(partial)["files"]["model-00002-of-00002.safetensors"]
    rows = failed(model_rows(spec, read({"n1": node_facts(), "n2": partial})))
    assert rows["model-00002-of-00002.safetensors"] == {"n1": "bbbbbbbbbbbb 10.5 MB", "n2": "missing"}
    assert "(named in model.safetensors.index.json)" in rows["model complete"]["n2"]


def test_identical_models_pass_with_one_summary_row() -> None:
    spec, _ = plan_and_spec()
    rows = model_rows(spec, read({"n1": node_facts(), "n2": node_facts()}))
    assert [r.item for r in rows] == [
        "/models/m exists",
        "model complete",
        "model files (5, 21.0 MB, sha256)",
    ]
    assert all(r.ok for r in rows)


def test_env_difference_fails_but_per_node_network_variables_may_differ() -> None:
    _, plan = plan_and_spec()
    n1, n2 = node_facts(), node_facts()
    n2["env"] = {**n2["env"], "VLLM_USE_V2_MODEL_RUNNER": "1", "VLLM_HOST_IP": "10.0.0.2"}
    rows = failed(env_rows(plan, {"n1": n1, "n2": n2}))
    assert rows == {"VLLM_USE_V2_MODEL_RUNNER": {"n1": "0", "n2": "1"}}


def test_network_rows_fail_on_missing_address_busy_port_and_no_route() -> None:
    spec, plan = plan_and_spec()
    head = node_facts(network__ports_free={"8000": False, "29501": True})
    worker = node_facts(network__holds_address=False)
    rows = failed(network_rows(spec, plan, {"n1": head, "n2": worker}, {"n2": "Connection refused"}))
    assert set(rows) == {"interface holds address", "port 8000 free on n1", "n1:29501 reachable"}


def probe_answer(plan: Plan) -> dict[str, Any]:
    """What a node's probe reports for `plan` when its vLLM derives exactly the plan."""
    planned = {d.setting: d.value for d in plan.derived}
    answer: dict[str, Any] = {key: planned.get(key, f"same-{key}") for key in AGREE}
    return {
        **answer,
        "mamba_cache_mode": "align",
        "num_speculative_tokens": 0,
        "missing": [],
        "config_hash": "h",
    }


def test_probe_differences_name_the_setting_and_the_pinning_flag() -> None:
    _, plan = plan_and_spec()
    same = probe_answer(plan)
    assert not [
        r.item for r in probe_rows(plan, load_catalog("0.32.0"), {"n1": same, "n2": same}) if r.failed
    ]
    rows = probe_rows(plan, load_catalog("0.32.0"), {"n1": same, "n2": {**same, "mamba_cache_mode": "none"}})
    bad = [r for r in rows if r.failed]
    assert [r.item for r in bad] == ["mamba_cache_mode"]
    assert bad[0].values == {"n1": "align", "n2": "none"} and "--mamba-cache-mode" in (bad[0].hint or "")
    # Agreeing with each other but not with the plan fails too.
    off = {**same, "enable_prefix_caching": False}
    assert [r.item for r in probe_rows(plan, load_catalog("0.32.0"), {"n1": off, "n2": off}) if r.failed] == [
        "enable_prefix_caching"
    ]


def test_a_field_the_probe_cannot_read_fails_even_when_every_node_lacks_it() -> None:
    _, plan = plan_and_spec()
    lacking = {**probe_answer(plan), "block_size": None, "missing": ["block_size"]}
    rows = [r for r in probe_rows(plan, load_catalog("0.32.0"), {"n1": lacking, "n2": lacking}) if r.failed]
    assert [r.item for r in rows] == ["block_size"]
    assert rows[0].values == {"n1": "(not reported)", "n2": "(not reported)"}
    assert "out of step" in (rows[0].hint or "")


def test_a_node_whose_probe_gives_no_hash_fails_the_hash_row_with_the_reason() -> None:
    """The row is never left out: each node's vLLM that cannot hash its config says why."""
    _, plan = plan_and_spec()
    same = probe_answer(plan)
    unhashed = {**same, "config_hash": None, "config_hash_error": "RuntimeError: no device"}
    rows = {r.item: r for r in probe_rows(plan, load_catalog("0.32.0"), {"n1": same, "n2": unhashed})}
    row = rows["vllm config hash"]
    assert row.failed and row.values == {"n1": "h", "n2": "(none: RuntimeError: no device)"}
    assert "the vLLM on n2 gives no config hash (n2: RuntimeError: no device)" in (row.hint or "")
    assert [r.item for r in rows.values() if r.failed] == ["vllm config hash"]


def test_a_setting_new_in_a_release_is_compared_from_it_on() -> None:
    """0.34's extensible KV cache: no row for an older release, and a node of 0.34 that cannot
    report it fails the row."""
    _, plan = plan_and_spec()
    same = probe_answer(plan)
    older = {**same, "missing": ["enable_extensible_kv_cache", "use_breakable_cudagraph"]}
    rows = probe_rows(plan, load_catalog("0.32.0"), {"n1": older, "n2": older})
    assert "enable_extensible_kv_cache" not in {r.item for r in rows}
    newer = replace(plan, vllm_version="0.34.0")
    rows = probe_rows(newer, load_catalog("0.34.0"), {"n1": same, "n2": older})
    bad = {r.item: r for r in rows if r.failed}
    assert set(bad) == {"enable_extensible_kv_cache", "use_breakable_cudagraph"}
    assert bad["enable_extensible_kv_cache"].values["n2"] == "(not reported)"
