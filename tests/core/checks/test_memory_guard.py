"""The memory guard: what the plan claims of each node, what it needs inside, and whether it fits.

No GB10 is here. tests/data/gb10-nvidia-smi.txt is `nvidia-smi --query-gpu=name,memory.total,
memory.free,driver_version --format=csv,noheader,nounits` as a GB10 prints it (no dedicated
memory: "[N/A]"), and tests/data/gb10-meminfo.txt /proc/meminfo as a 128 GB DGX Spark prints
it with a large page cache; both are read by the very functions the node runs
(launcher/node/scripts/memory.py). The refusal on a real node is tests/e2e/test_memory.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.memory_guard import gb10_facts, guard
from launcher.core.checks.budget import CPU, GPU, UNIFIED, GiB, kv_bytes_per_token, node_kind
from launcher.core.checks.memory_rows import memory_rows
from launcher.core.serving.startup_log import diagnose
from launcher.node.scripts import bundle
from launcher.node.scripts.memory import parse_gpu_query, parse_meminfo
from tests.conftest import ROOT, base_spec, plan_of, spec_of

DATA = ROOT / "tests" / "data"


def test_a_gb10_reports_no_gpu_memory_of_its_own_so_it_is_unified() -> None:
    gpus = parse_gpu_query((DATA / "gb10-nvidia-smi.txt").read_text())
    assert gpus == [{"name": "NVIDIA GB10", "total": None, "free": None, "driver": "580.95.05"}]
    assert node_kind(gpus) == UNIFIED


def test_not_supported_is_read_like_na() -> None:
    assert parse_gpu_query("NVIDIA GB10, Not Supported, Not Supported, 580.95.05")[0]["total"] is None


def test_a_discrete_gpu_reports_its_memory() -> None:
    gpus = parse_gpu_query((DATA / "h100-nvidia-smi.txt").read_text())
    assert gpus[0]["total"] == 81559 * 2**20 and gpus[0]["free"] == 80792 * 2**20
    assert node_kind(gpus) == GPU
    assert node_kind(None) == node_kind([]) == CPU


def test_the_gb10_meminfo_is_read_in_bytes() -> None:
    info = parse_meminfo((DATA / "gb10-meminfo.txt").read_text())
    assert info["MemTotal"] == 127600748 * 1024
    assert info["MemAvailable"] - info["MemFree"] > 70 * GiB  # the page cache left by a weight copy


def test_qwen3_next_kv_cache_counts_only_its_full_attention_layers() -> None:
    config = {
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "full_attention_interval": 4,
        "torch_dtype": "bfloat16",
    }
    # 12 attention layers x K and V x 1 head per rank (2 heads over TP 2) x 256 x 2 bytes
    assert kv_bytes_per_token(config, 2, 1, {}) == 12 * 2 * 1 * 256 * 2
    assert kv_bytes_per_token(config, 2, 1, {"kv_cache_dtype": "fp8"}) == 12 * 2 * 1 * 256
    layer_types = {**config, "layer_types": ["linear_attention"] * 3 + ["full_attention"]}
    assert kv_bytes_per_token(layer_types, 1, 1, {}) == 1 * 2 * 2 * 256 * 2
    assert kv_bytes_per_token({"num_hidden_layers": 4}, 1, 1, {}) is None


def test_on_a_gb10_with_page_cache_the_example_is_refused_with_drop_caches_as_the_fix() -> None:
    found, rows = guard("qwen3-next-2x-spark.yaml")
    budget = found["spark-1"]
    assert budget.kind == UNIFIED and f"{budget.total / GiB:.1f}" == "121.7"
    assert f"{budget.claim / GiB:.1f}" == "103.4"  # 0.85 x 121.7 GiB
    by_item = {r.item: r for r in rows}
    assert by_item["claim holds weights + KV"].ok and by_item["claim fits the memory"].ok
    cache = by_item["claim fits without page cache"]
    assert cache.failed and cache.values["spark-1"] == "103.4 of 34.2 free"
    assert "`spark-launch up --drop-caches`" in str(cache.hint) and "(also on spark-2)" in str(cache.hint)


def test_right_after_dropping_the_page_cache_every_example_fits_a_gb10(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for config in ("qwen3-next-2x-spark.yaml", "qwen3-next-2x-spark-v032.yaml", "dense-2x-spark.yaml"):
        _, rows = guard(config, dropped=True)
        assert all(r.ok for r in rows), [r for r in rows if not r.ok]


def gb10_rows(**serve: Any) -> dict[str, Any]:
    data = base_spec("0.33.0")
    data["serve"].update(serve)
    facts = {n: gb10_facts("/models/Qwen3-Next-80B-A3B-Instruct", dropped=True) for n in ("n1", "n2")}
    return {r.item: r for r in memory_rows(spec_of(data), plan_of(data), facts)}


def test_a_claim_too_small_for_the_weights_names_the_utilization_that_fits() -> None:
    row = gb10_rows(gpu_memory_utilization=0.5, max_model_len=262144)["claim holds weights + KV"]
    assert row.failed
    assert "n1: the plan claims 60.8 GiB (gpu_memory_utilization 0.5 x 121.7 GiB) but needs 78.8" in str(
        row.hint
    )
    assert "raise gpu_memory_utilization to at least 0.65" in str(row.hint)


def test_a_claim_above_what_the_node_has_names_the_utilization_that_fits() -> None:
    row = gb10_rows(gpu_memory_utilization=0.95)["claim fits the memory"]
    assert row.failed
    assert "claims 115.6 GiB" in str(row.hint) and "lower gpu_memory_utilization to 0.89 or less" in str(
        row.hint
    )


def test_cpu_build_claims_its_kv_cache_space_beside_the_weights() -> None:
    data = base_spec("0.32.0")
    data["env"] = {"VLLM_CPU_KVCACHE_SPACE": "64"}
    facts = {
        n: {
            "memory": {"meminfo": {"MemTotal": 24 * GiB, "MemFree": 10 * GiB, "MemAvailable": 22 * GiB}},
            "model": {"weight_bytes": 2 * GiB},
        }
        for n in ("n1", "n2")
    }
    rows = {r.item: r for r in memory_rows(spec_of(data), plan_of(data), facts)}
    assert rows["kind"].values["n1"] == "CPU build"
    fits = rows["claim fits the memory"]
    assert fits.failed and fits.values["n1"] == "65.0 of 18.0 usable"
    assert "64.0 GiB of KV cache (VLLM_CPU_KVCACHE_SPACE=64) + 1.0 GiB of weights" in str(fits.hint)
    assert "lower VLLM_CPU_KVCACHE_SPACE to 17 or less" in str(fits.hint)
    assert "claim fits without page cache" not in rows  # the CPU takes page cache back by itself


def test_dropping_caches_as_a_user_without_sudo_rights_says_so(tmp_path: Path) -> None:
    """The real node script, run as `nobody`: not root, and sudo is not there or not allowed."""
    done = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "/usr/bin/python3",
            "-",
            "drop",
            str(tmp_path),
        ],
        input=bundle("drop"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"ok": false' in done.stdout and '"user": "nobody"' in done.stdout
    assert "sudo is not installed" in done.stdout or "not permitted: `sudo -n tee" in done.stdout


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: Free memory on device cuda:0 (33.1/121.69 GiB) on startup is less than desired GPU "
        "memory utilization (0.85, 103.44 GiB). Decrease GPU memory utilization or reduce GPU memory used "
        "by other processes.",
        "ValueError: Available memory on node 0 (3.1/23.5 GiB) on kv cache allocation is less than requested "
        "memory for kv (64.00 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU "
        "memory used by other processes.",
    ],
    ids=["gpu-free-memory-at-start", "cpu-kv-cache-space"],
)
def test_vllms_own_memory_refusals_at_start_point_to_drop_caches(line: str) -> None:
    found = diagnose(f"INFO starting\n{line}\n")
    assert found is not None and found.title == "the node had less free memory at start than the plan claims"
    assert "`spark-launch up --drop-caches`" in found.hint


def test_with_this_cluster_running_its_own_memory_does_not_block_a_check() -> None:
    data = base_spec("0.33.0")
    facts = {
        n: {**gb10_facts("/models/Qwen3-Next-80B-A3B-Instruct"), "ours_running": True} for n in ("n1", "n2")
    }
    rows = {r.item: r for r in memory_rows(spec_of(data), plan_of(data), facts)}
    cache = rows["claim fits without page cache"]
    assert not cache.ok and not cache.failed and cache.level == "warn"
    assert "its own memory counts as used" in str(cache.hint)
