"""The launcher against the REAL vLLM of each supported release (the conformance tier).

- the committed flag catalogs equal what the real parsers say;
- every rendered command is accepted by that release's own `vllm serve` parser, also
  after going through a real shell;
- for a hybrid model, the values the plan decides equal what vLLM's own
  create_engine_config() derives from each node's argv and env, on every node alike;
- the plan's defaults equal vLLM's own defaults when the pinning flags are left out;
- and, as a control, a hand-split pair (prefix caching on one node only) really resolves
  to different mamba cache modes: the failure of the field report.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.catalogs import CATALOG_DIR
from launcher.core.plan import Plan
from launcher.core.render import shell_words
from launcher.node.scripts.probe import MARKER
from tests.conformance.conftest import probe_file, run_probe
from tests.conftest import ROOT
from tests.conftest import plan_of as plan_for

pytestmark = pytest.mark.conformance

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
# Settings that must come out equal on every node (node_rank is the one that may differ).
AGREE = [
    "enable_prefix_caching",
    "mamba_cache_mode",
    "mamba_block_size",
    "block_size",
    "cache_dtype",
    "mamba_ssm_cache_dtype",
    "enable_chunked_prefill",
    "max_num_seqs",
    "max_num_batched_tokens",
    "async_scheduling",
    "num_speculative_tokens",
    "dtype",
    "max_model_len",
    "compilation_mode",
    "cudagraph_mode",
    "tensor_parallel_size",
    "nnodes",
    "master_addr",
    "master_port",
]


def retarget(data: dict[str, Any], version: str, venv: Path, model: Path) -> dict[str, Any]:
    """A spec pointed at this machine's vLLM venv and tiny model, on the given release."""
    out = copy.deepcopy(data)
    out["vllm"] = {"version": version, "runtime": "venv", "venv": str(venv)}
    out["model"] = {**out["model"], "path": str(model)}
    out["serve"] = {
        k: v for k, v in out["serve"].items() if k not in ("gpu_memory_utilization", "kv_cache_dtype")
    }
    out["serve"]["max_model_len"] = 512
    out["serve"]["enforce_eager"] = True
    return out


def variants(version: str, venv: Path, model: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every example config, and the variants that exercise each rule."""
    specs = [(p.stem, retarget(yaml.safe_load(p.read_text()), version, venv, model)) for p in CONFIGS]
    qwen = dict(specs)["qwen3-next-2x-spark"]
    off = copy.deepcopy(qwen)
    off["serve"]["enable_prefix_caching"] = False
    off["serve"].pop("speculative_config")
    unset = copy.deepcopy(qwen)
    unset["serve"].pop("enable_prefix_caching")
    hostile = copy.deepcopy(qwen)
    hostile["model"]["served_name"] = 'it\'s "quoted" $(not run) `x` ; & | *'
    hostile["serve"]["chat_template"] = "--not-a-flag {{ messages }}\n'; rm -rf /"
    return [*specs, ("prefix-caching-off", off), ("prefix-caching-unset", unset), ("hostile", hostile)]


def plan_of(data: dict[str, Any]) -> Plan:
    return plan_for(data, data["model"].get("hybrid", True))


def test_catalog_matches_the_real_parser(vllm: tuple[str, Path]) -> None:
    version, venv = vllm
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(ROOT / "scripts" / "gen_catalog.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    committed = json.loads((CATALOG_DIR / f"vllm-{version}.json").read_text())
    assert json.loads(done.stdout) == committed, "catalog is stale: run `make catalogs`"


def test_plans_resolve_in_real_vllm_as_planned(vllm: tuple[str, Path], tiny_model: Path) -> None:
    version, venv = vllm
    cases = [(name, plan_of(data)) for name, data in variants(version, venv, tiny_model)]
    jobs = [
        {"op": "resolve", "argv": list(node.argv[2:]), "env": node.env}
        for _, plan in cases
        for node in plan.nodes
    ]
    results = iter(run_probe(venv, jobs))
    for name, plan in cases:
        per_node = [next(results) for _ in plan.nodes]
        for node, result in zip(plan.nodes, per_node, strict=True):
            assert result["ok"], f"{name}/{node.name}: {result.get('error')}"
            got = result["resolved"]
            assert got["node_rank"] == node.rank
            assert result["args"]["headless"] == (node.rank > 0)
            for row in plan.derived:
                if row.setting in got and row.setting != "node_rank":
                    assert got[row.setting] == row.value, f"{name}/{node.name}: {row.setting}"
        for key in AGREE:
            values = {json.dumps(r["resolved"][key]) for r in per_node}
            assert len(values) == 1, f"{name}: {key} differs across nodes: {values}"


def test_plan_defaults_equal_vllm_defaults(vllm: tuple[str, Path], tiny_model: Path) -> None:
    """Leave out the flags the plan pins: vLLM must derive the same values on its own."""
    version, venv = vllm
    data = dict(variants(version, venv, tiny_model))["prefix-caching-unset"]
    plan = plan_of(data)
    pinned = ("--enable-prefix-caching", "--mamba-cache-mode", "--enable-chunked-prefill")
    argv = [a for a in plan.nodes[1].argv[2:] if not a.startswith(pinned)]
    (result,) = run_probe(venv, [{"op": "resolve", "argv": argv, "env": plan.nodes[1].env}])
    assert result["ok"], result.get("error")
    rows = {d.setting: d.value for d in plan.derived}
    for key in ("enable_prefix_caching", "mamba_cache_mode", "enable_chunked_prefill"):
        assert result["resolved"][key] == rows[key], key


def test_rendered_command_survives_a_real_shell(vllm: tuple[str, Path], tiny_model: Path) -> None:
    version, venv = vllm
    plan = plan_of(dict(variants(version, venv, tiny_model))["hostile"])
    node = plan.nodes[1]
    line = shell_words([str(venv / "bin" / "python"), str(probe_file()), "parse", *node.argv[2:]])
    done = subprocess.run(
        ["bash", "-c", line],
        capture_output=True,
        text=True,
        check=False,
        env={"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    (out,) = [json.loads(x[len(MARKER) :]) for x in done.stdout.splitlines() if x.startswith(MARKER)]
    assert out["ok"], out.get("error")
    assert out["args"]["served_model_name"] == ['it\'s "quoted" $(not run) `x` ; & | *']
    assert out["args"]["chat_template"] == "--not-a-flag {{ messages }}\n'; rm -rf /"
    assert out["args"]["node_rank"] == 1 and out["args"]["headless"] is True


def test_hand_split_inputs_really_diverge(vllm: tuple[str, Path], tiny_model: Path) -> None:
    """The control: the field report's split (prefix caching on one node only) resolves apart."""
    version, venv = vllm
    plan = plan_of(dict(variants(version, venv, tiny_model))["prefix-caching-unset"])
    head = [a for a in plan.nodes[0].argv[2:] if not a.startswith("--mamba-cache-mode")]
    worker = [
        a for a in plan.nodes[1].argv[2:] if not a.startswith(("--enable-prefix", "--mamba-cache-mode"))
    ]
    negative = "--no-enable-prefix-caching" if version == "0.32.0" else "--disable-prefix-caching"
    worker.insert(1, negative)
    a, b = run_probe(
        venv, [{"op": "resolve", "argv": head, "env": {}}, {"op": "resolve", "argv": worker, "env": {}}]
    )
    assert (a["resolved"]["mamba_cache_mode"], b["resolved"]["mamba_cache_mode"]) == ("align", "none")
    assert a["resolved"]["mamba_block_size"] != b["resolved"]["mamba_block_size"]
