"""Rows of memory: does the plan fit each node, before anything loads? Pure.

Fails (with the numbers and the fix) when the weights and one sequence of KV cache do not
fit what the plan claims, when the claim is above what the node has even after dropping
the page cache (less a floor for the system), and, on unified memory, when the page cache
is what is in the way (`up --drop-caches`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from launcher.core.checks.budget import CPU, GPU, UNIFIED, Budget, budget, gib
from launcher.core.checks.check_report import Row
from launcher.core.plan import Plan
from launcher.core.rules.memory_split import FLOOR, node_memory
from launcher.core.spec.sections import Spec

KINDS = {UNIFIED: "unified (GPU = system)", GPU: "GPU memory", CPU: "CPU build"}


PINS = ("gpu_memory_utilization", "kv_cache_memory_bytes")


def budgets(spec: Spec, plan: Plan, facts: Mapping[str, Mapping[str, Any]]) -> dict[str, Budget]:
    """Each node's budget from its facts and the plan (the memory split it pinned)."""
    gpus = {n.name: n.gpus for n in spec.nodes}
    env = {n.name: n.env for n in plan.nodes}
    serve = {**spec.serve, **{d.setting: d.value for d in plan.derived if d.setting in PINS}}
    return {
        name: budget(
            serve,
            env[name],
            gpus[name],
            f.get("memory") or {},
            int(f.get("model", {}).get("weight_bytes") or 0),
            plan.vllm_version,
        )
        for name, f in facts.items()
    }


def memory_rows(spec: Spec, plan: Plan, facts: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """The memory each node has, what the plan claims there, and whether it fits."""
    b = budgets(spec, plan, facts)
    # With this cluster running, its own memory counts as used: report, but do not block.
    level = "warn" if any(f.get("ours_running") for f in facts.values()) else "fail"
    unknown = [
        n for n, f in facts.items() if not ((f.get("memory") or {}).get("meminfo") or {}).get("MemTotal")
    ]
    if unknown:  # never left out: a claim that cannot be weighed is not known to fit
        values = {n: "(not reported)" if n in unknown else "reported" for n in facts}
        hint = f"{', '.join(unknown)} reported no memory (/proc/meminfo): whether the plan fits is unknown"
        return [Row("memory", "claim fits the memory", values, False, hint, level)]
    rows = [
        Row("memory", "kind", {n: KINDS[x.kind] for n, x in b.items()}, True, level="warn"),
        Row(
            "memory",
            "available GiB (page cache)",
            {n: f"{gib(x.available)} ({gib(x.page_cache)} cache)" for n, x in b.items()},
            True,
            level="warn",
        ),
        _row(b, "claim holds weights + KV", lambda x: x.need <= x.inside, _holds, _too_small, "fail"),
        _row(b, "claim fits the memory", lambda x: x.claim <= x.usable, _fits, _too_big, level),
    ]
    if any(x.usable_now is not None for x in b.values()):
        rows.append(
            _row(b, "claim fits without page cache", _fits_now, _fits_now_text, _cache_in_the_way, level)
        )
    elif any(x.kind == UNIFIED for x in b.values()):  # said, not left out: this release does not check
        unchecked = "not checked at start-up: the extensible KV cache sizes itself from what is free"
        rows.append(Row("memory", "claim fits without page cache", dict.fromkeys(b, unchecked), True))
    planned = planned_memory_row(spec, plan, b)
    return rows + ([planned] if planned else [])


def planned_memory_row(spec: Spec, plan: Plan, b: Mapping[str, Budget]) -> Row | None:
    """Each node's memory as the plan divided it (the spec's nodes[].memory_gib, else a Spark's)
    against the node's own; only where the plan sized the split itself (and the node is no CPU
    build with its KV cache set apart)."""
    decided = {d.setting for d in plan.derived if d.setting in PINS and d.source == "launcher"}
    if not decided:
        return None
    nodes = {n.name: n for n in spec.nodes}
    assumed = {n: node_memory(nodes[n]) for n in b if n in nodes}
    values, less, more = {}, [], []
    for name, x in b.items():
        if x.kind == CPU and x.kv_space is not None:
            values[name] = "not used (the CPU build's KV cache is set apart)"
            continue
        values[name] = f"planned {gib(assumed[name])} GiB, has {gib(x.total)}"
        if x.total < assumed[name] * 0.98:
            less.append(name)
        elif x.total > assumed[name] * 1.05:
            more.append(name)
    fix = ", ".join(
        f"nodes[{list(nodes).index(n)}].memory_gib: {int(b[n].total / (1 << 30) * 10) / 10:g}"
        for n in less + more
    )
    if less:
        hint = f"the plan divided more memory than {', '.join(less)} has: write {fix}"
        return Row("memory", "memory as planned", values, False, hint)
    if more:
        hint = f"{', '.join(more)} has more memory than the plan divided (it stays unused): write {fix}"
        return Row("memory", "memory as planned", values, False, hint, "warn")
    return Row("memory", "memory as planned", values, True)


def _row(b: dict[str, Budget], item: str, ok: Any, value: Any, hint: Any, level: str) -> Row:
    failing = [n for n, x in b.items() if not ok(x)]
    advice = None
    if failing:  # the first node's numbers; the others' are in the row
        advice = hint(failing[0], b[failing[0]])
        advice += f" (also on {', '.join(failing[1:])})" if failing[1:] else ""
        advice += " [this cluster runs now: its own memory counts as used]" if level == "warn" else ""
    return Row("memory", item, {n: value(x) for n, x in b.items()}, not failing, advice, level)


def _holds(x: Budget) -> str:
    return f"needs {gib(x.need)} of {gib(x.inside)}" if x.kv is not None else f"weights {gib(x.weights)}"


def _fits(x: Budget) -> str:
    return f"{gib(x.claim)} of {gib(x.usable)} usable"


def _fits_now(x: Budget) -> bool:
    return x.usable_now is None or x.claim <= x.usable_now


def _fits_now_text(x: Budget) -> str:
    return f"{gib(x.claim)} of {gib(x.usable_now)} free" if x.usable_now is not None else "n/a"


def _too_small(node: str, x: Budget) -> str:
    kv = f" + KV cache for one max_model_len sequence {gib(x.kv)}" if x.kv is not None else ""
    if x.kv_space is not None:
        knob = "kv_cache_memory_bytes" if "kv_cache_memory_bytes" in x.claim_how else "VLLM_CPU_KVCACHE_SPACE"
        return (
            f"{node}: the KV cache space {gib(x.kv_space)} GiB is below one max_model_len sequence "
            f"({gib(x.kv or 0)} GiB): raise {knob} or lower max_model_len"
        )
    low = (x.need / x.total) if x.total else 0.0
    return (
        f"{node}: the plan claims {gib(x.claim)} GiB ({x.claim_how}) but needs {gib(x.need)}: its "
        f"share of the weights {gib(x.weights)}{kv}; raise gpu_memory_utilization to at least "
        f"{_up(low)}, or lower max_model_len, or spread the model over more nodes"
    )


def _too_big(node: str, x: Budget) -> str:
    what = f"{node}: the plan claims {gib(x.claim)} GiB ({x.claim_how})"
    if x.kind == GPU:
        return (
            f"{what} but the GPU has {gib(x.usable)} GiB free: lower gpu_memory_utilization to "
            f"{_down(x.usable / x.total)} or less, or stop what uses the GPU"
        )
    room = f"{gib(x.available)} GiB available less {gib(FLOOR)} kept for the system"
    if x.kv_space is not None and "kv_cache_memory_bytes" in x.claim_how:
        return f"{what} but has {gib(x.usable)} usable ({room}): lower kv_cache_memory_bytes, or free memory"
    if x.kv_space is not None:
        fit = max(0, (x.usable - x.weights) // (1 << 30))
        return (
            f"{what} but has {gib(x.usable)} usable ({room}): lower VLLM_CPU_KVCACHE_SPACE to {fit} "
            "or less, or free memory there"
        )
    return (
        f"{what} but has {gib(x.usable)} usable ({room}, page cache included): lower "
        f"gpu_memory_utilization to {_down(x.usable / x.total)} or less, or stop what uses memory there"
    )


def _cache_in_the_way(node: str, x: Budget) -> str:
    return (
        f"{node}: the plan claims {gib(x.claim)} GiB but only {gib(x.usable_now or 0)} is free less "
        f"{gib(FLOOR)} for the system; the page cache holds {gib(x.page_cache)} GiB, which CUDA's "
        f"start-up check does not count as free on unified memory: `spark-launch up --drop-caches` "
        f"(sync, then drop the page cache on every node), or lower gpu_memory_utilization to "
        f"{_down((x.usable_now or 0) / x.total)}"
    )


def _down(fraction: float) -> str:
    """A utilization rounded down to two decimals (never below zero)."""
    return f"{max(0.0, int(fraction * 100) / 100):.2f}"


def _up(fraction: float) -> str:
    """A utilization rounded up to two decimals."""
    return f"{math.ceil(fraction * 100) / 100:.2f}"


def shared_memory_row(weighed: Mapping[str, Mapping[str, Budget]]) -> Row | None:
    """What several deployments about to start claim of each node they share, together.

    Each deployment's own rows weigh its claim alone; on a node two of them share, the sum of
    their claims (each from its own resolved settings) must fit what the node has. None when
    no node is shared.
    """
    shared: dict[str, dict[str, Budget]] = {}
    for name, per_node in weighed.items():
        for node, b in per_node.items():
            shared.setdefault(node, {})[name] = b
    shared = {n: d for n, d in shared.items() if len(d) > 1}
    if not shared:
        return None
    values = {n: _together_text(d) for n, d in shared.items()}
    over = [n for n, d in shared.items() if _total(d) > _usable(d)]
    hint = _over_hint(over[0], shared[over[0]]) if over else None
    if hint and over[1:]:
        hint += f" (also on {', '.join(over[1:])})"
    return Row("memory", "deployments' claims fit together", values, not over, hint)


def _total(claims: Mapping[str, Budget]) -> int:
    return sum(b.claim for b in claims.values())


def _usable(claims: Mapping[str, Budget]) -> int:
    """What the node has for them all (the least any deployment's look at the node saw)."""
    return min(b.usable for b in claims.values())


def _together_text(claims: Mapping[str, Budget]) -> str:
    parts = " + ".join(f"{name} {gib(b.claim)}" for name, b in claims.items())
    return f"{parts} = {gib(_total(claims))} of {gib(_usable(claims))} usable"


def _over_hint(node: str, claims: Mapping[str, Budget]) -> str:
    each = "; ".join(f"{name} claims {gib(b.claim)} GiB ({b.claim_how})" for name, b in claims.items())
    return (
        f"{node}: the deployments on it claim {gib(_total(claims))} GiB together but it has "
        f"{gib(_usable(claims))} GiB usable ({each}): lower their gpu_memory_utilization (or KV cache "
        "space) so that the sum fits, or place one of them on another node"
    )
