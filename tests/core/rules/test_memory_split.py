"""The memory split: never left to vLLM's default, the same argv on every node, said in the plan."""

from __future__ import annotations

from typing import Any

import pytest

from launcher.catalogs import load_catalog
from launcher.core.checks.budget import budget, default_utilization
from launcher.core.checks.memory_rows import memory_rows
from launcher.core.plan import Plan, PlanProblems, build_plan
from launcher.core.receipts.upgrade import compare_release, comparison_text
from launcher.core.rules.base import Sharing
from launcher.core.rules.memory_split import ACTIVATIONS, GiB, size_bytes
from launcher.core.vllm.models import kind_facts
from tests.conftest import base_spec, edit, plan_of, spec_of


def derived(plan: Plan) -> dict[str, Any]:
    return {d.setting: d.value for d in plan.derived}


def engine_args(plan: Plan, rank: int) -> list[str]:
    """A node's argv less the two flags that differ by rank."""
    return [a for a in plan.nodes[rank].argv if not a.startswith("--node-rank") and a != "--headless"]


def plan_shared(data: dict[str, Any], sharing: Sharing) -> Plan:
    spec = spec_of(data)
    catalog = load_catalog(spec.vllm.version)
    return build_plan(spec, kind_facts("hybrid", "model.kind in the spec"), catalog, sharing)


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0", "0.34.0"])
def test_unset_the_plan_pins_a_fraction_of_a_sparks_memory_less_the_reserve(version: str) -> None:
    plan = plan_of(base_spec(version))
    assert derived(plan)["gpu_memory_utilization"] == 0.85
    assert "kv_cache_memory_bytes" not in derived(plan)
    assert all("--gpu-memory-utilization=0.85" in n.argv for n in plan.nodes)
    row = next(d for d in plan.derived if d.setting == "gpu_memory_utilization")
    assert row.source == "launcher" and "vllm/config/cache.py" in row.reason
    (note,) = [n for n in plan.notes if n.startswith("gpu_memory_utilization")]
    assert "less 4 GiB for the OS and 14 GiB for the page cache" in note
    assert "n1, n2: 121.7 GiB (a 128 GB DGX Spark; nodes[].memory_gib unset): 103.7 GiB" in note


def test_the_spec_value_wins_and_is_written_out() -> None:
    plan = plan_of(edit(base_spec(), **{"serve.gpu_memory_utilization": 0.6}))
    assert derived(plan)["gpu_memory_utilization"] == 0.6
    assert [d.source for d in plan.derived if d.setting == "gpu_memory_utilization"] == ["spec"]
    assert "--gpu-memory-utilization=0.6" in plan.nodes[1].argv


def test_deployments_on_one_node_share_it() -> None:
    plan = plan_shared(base_spec("0.33.0"), Sharing({"n1": 1, "n2": 2}))
    assert derived(plan)["gpu_memory_utilization"] == 0.42  # (121.7 - 18) / 2 / 121.7, rounded down
    assert any(
        "n2: 121.7 GiB (a 128 GB DGX Spark; nodes[].memory_gib unset), shared by 2" in n for n in plan.notes
    )


def test_nodes_of_different_memory_need_the_kv_cache_in_bytes_and_say_why() -> None:
    data = edit(base_spec("0.34.0"), **{"nodes.1.memory_gib": 60.8})
    with pytest.raises(PlanProblems) as caught:
        plan_of(data)
    (problem,) = caught.value.problems
    assert problem.path == ("serve", "kv_cache_memory_bytes")
    assert "the nodes' memory differs" in problem.message and "'24G'" in str(problem.hint)


def test_an_upgrade_preview_divides_the_memory_as_the_plan_did() -> None:
    """--compare-release plans the new release with the same sharing: nodes of different memory
    keep their KV cache in bytes (without the weights it is refused, as the plan itself is)."""
    data = edit(base_spec("0.33.0"), **{"nodes.1.memory_gib": 60.8})
    sharing = Sharing({}, 40 * GiB)
    spec, facts = spec_of(data), kind_facts("hybrid", "model.kind in the spec")
    plan = plan_shared(data, sharing)
    same = compare_release(spec, plan, load_catalog("0.33.0"), load_catalog("0.33.0"), facts, sharing)
    assert not [c for c in same.changes if c.kind == "refused"], comparison_text(same)
    moved = compare_release(spec, plan, load_catalog("0.33.0"), load_catalog("0.34.0"), facts, sharing)
    assert not [c for c in moved.changes if c.kind == "refused"], comparison_text(moved)


def test_nodes_of_different_memory_get_one_kv_cache_size_and_one_argv() -> None:
    """A 128 GB and a 64 GB Spark: the same KV cache on every rank, the same flags on every node."""
    weights = 40 * GiB
    data = edit(base_spec("0.34.0"), **{"nodes.1.memory_gib": 60.8})
    plan = plan_shared(data, Sharing({}, weights))
    kv = derived(plan)["kv_cache_memory_bytes"]
    small = int(60.8 * GiB) - 18 * GiB
    assert kv == (small - weights // 2 - ACTIVATIONS) // (1 << 20) * (1 << 20)
    assert engine_args(plan, 0) == engine_args(plan, 1)
    assert f"--kv-cache-memory-bytes={kv}" in plan.nodes[0].argv
    # The fraction is the smaller node's, so it never demands more than a node's share.
    assert derived(plan)["gpu_memory_utilization"] == 0.70
    assert any(n.startswith(f"KV cache {kv / GiB:.2f} GiB on every rank") for n in plan.notes)


def test_a_kv_cache_size_in_the_spec_is_pinned_in_bytes() -> None:
    plan = plan_of(edit(base_spec("0.33.0"), **{"serve.kv_cache_memory_bytes": "8G"}))
    assert derived(plan)["kv_cache_memory_bytes"] == 8 * GiB
    assert f"--kv-cache-memory-bytes={8 * GiB}" in plan.nodes[1].argv
    assert size_bytes("8g") == 8 * 10**9 and size_bytes(4096) == 4096


def test_the_budget_knows_each_releases_default() -> None:
    assert default_utilization("0.32.0", False) == default_utilization("0.33.0", True) == 0.92
    assert default_utilization("0.34.0", True) == 1.0 and default_utilization("0.34.0", False) == 0.92
    unified = {
        "meminfo": {"MemTotal": 100 * GiB, "MemFree": 90 * GiB, "MemAvailable": 95 * GiB},
        "gpus": [{"name": "NVIDIA GB10", "total": None, "free": None, "driver": "580"}],
    }
    old = budget({}, {}, 1, unified, 0, "0.33.0")
    assert old.claim == int(0.92 * 100 * GiB) and old.usable_now is not None
    new = budget({}, {}, 1, unified, 0, "0.34.0")  # the extensible KV cache: 1.0, no start-up check
    assert new.claim == 100 * GiB and new.usable_now is None
    pinned = budget({"kv_cache_memory_bytes": 8 * GiB}, {}, 1, unified, 10 * GiB, "0.34.0")
    assert pinned.claim == 18 * GiB + ACTIVATIONS and pinned.kv_space == 8 * GiB


def spark_facts(total: int) -> dict[str, Any]:
    return {
        "memory": {
            "meminfo": {"MemTotal": total, "MemFree": total - 8 * GiB, "MemAvailable": total - 6 * GiB},
            "gpus": [{"name": "NVIDIA GB10", "total": None, "free": None, "driver": "580"}],
        },
        "model": {"weight_bytes": 10 * GiB},
    }


def test_check_holds_each_node_to_the_memory_the_plan_divided() -> None:
    data = base_spec("0.33.0")
    plan = plan_of(data)
    facts = {"n1": spark_facts(127600748 * 1024), "n2": spark_facts(int(60.8 * GiB))}
    rows = {r.item: r for r in memory_rows(spec_of(data), plan, facts)}
    row = rows["memory as planned"]
    assert row.failed and row.values["n2"] == "planned 121.7 GiB, has 60.8"
    assert "nodes[1].memory_gib: 60.7" in str(row.hint)  # rounded down: never more than it has


def test_a_node_that_reports_no_memory_keeps_the_row_failing() -> None:
    data = base_spec("0.33.0")
    facts = {"n1": spark_facts(127600748 * 1024), "n2": {"memory": {}, "model": {}}}
    rows = {r.item: r for r in memory_rows(spec_of(data), plan_of(data), facts)}
    row = rows["claim fits the memory"]
    assert row.failed and row.values == {"n1": "reported", "n2": "(not reported)"}


def test_on_034_the_page_cache_row_says_the_release_does_not_check_it() -> None:
    """0.34's extensible KV cache skips vLLM's start-up check of free memory: the row stays, said."""
    data = base_spec("0.34.0")
    facts = {n: spark_facts(127600748 * 1024) for n in ("n1", "n2")}
    rows = {r.item: r for r in memory_rows(spec_of(data), plan_of(data), facts)}
    row = rows["claim fits without page cache"]
    assert row.ok and row.values["n1"].startswith("not checked at start-up")
    old = {r.item: r for r in memory_rows(spec_of(base_spec("0.33.0")), plan_of(base_spec("0.33.0")), facts)}
    assert old["claim fits without page cache"].values["n1"].endswith("free")
