"""Known regressions: a table of host states that break a Spark pair, checked on every node. Pure.

Each entry says what it matches in a node's host facts (every condition must hold), the
symptom an operator would otherwise meet after the weights load, the fix, and the public
reports it comes from. An entry that CUDA graphs trigger is spared when the plan runs
`--enforce-eager`. Add an entry here when a new one is reported: a row names it and its fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.checks.check_report import Row
from launcher.core.plan import Plan


@dataclass(frozen=True, slots=True)
class When:
    """One condition on a node's signs: `fact` matches a regex, holds or lacks a word, or exceeds another."""

    fact: str
    op: str  # matches, contains, lacks, above
    value: str

    def holds(self, signs: Mapping[str, Any]) -> bool:
        """True when the condition holds for these signs (an unknown fact never matches)."""
        have = signs.get(self.fact)
        if have is None:
            return False
        if self.op == "above":
            other = signs.get(self.value)
            return other is not None and int(have) > int(other)
        if self.op == "lacks":
            return self.value not in str(have).split()
        if self.op == "contains":
            return self.value in str(have)
        return re.search(self.value, str(have)) is not None


@dataclass(frozen=True, slots=True)
class Regression:
    """A known bad state of a host: what matches it, what it does, the fix, where it was reported."""

    name: str
    when: tuple[When, ...]
    symptom: str
    fix: str
    sources: tuple[str, ...]
    spared_by: str | None = None  # an argv word of the plan that avoids it (--enforce-eager)
    multi_node: bool = False  # only across nodes
    level: str = "fail"


REGRESSIONS = (
    Regression(
        name="known regression: kernel 7.0 (DGX OS 7.0.0-1019-nvidia) with kexec handover on",
        when=(
            When("kernel", "matches", r"^7\.0\.0-"),
            When("CmaFree", "above", "CmaTotal"),
            When("cmdline", "lacks", "kho=off"),
        ),
        symptom="NCCL over RoCE fails at start-up with `Call to ibv_reg_mr_iova2 failed with error "
        "Cannot allocate memory` (ENOMEM): the kernel's kexec-handover scratch memory cannot be "
        "pinned, and shows in /proc/meminfo as CmaFree above CmaTotal",
        fix="add `kho=off` to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, "
        "update-grub, reboot), or boot the previous kernel (6.17.0-1032-nvidia was reported to work)",
        sources=(
            "https://github.com/MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks/issues/14",
            "https://github.com/MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark/issues/259",
            "https://github.com/NVIDIA/NV-Kernels/pull/590",
        ),
    ),
    Regression(
        name="known regression: NVIDIA driver 590 on GB10 (CUDA-graph capture deadlocks)",
        when=(When("gpu", "contains", "GB10"), When("driver", "matches", r"^590\.")),
        symptom="the engine hangs while it captures CUDA graphs, after the weights load, until a timeout",
        fix="install the previous driver series, 580; or serve with `enforce_eager: true` (no graph "
        "capture, at a cost in speed)",
        sources=("https://conselara.dev/notes/dgx-spark-gb10-hardware-reference/",),
        spared_by="--enforce-eager",
    ),
    Regression(
        name="known regression: NCCL 2.28.9 across nodes (CUDA-graph replay deadlocks)",
        when=(When("nccl", "matches", r"^2\.28\.9$"),),
        symptom="with CUDA graphs on, serving deadlocks in the first requests on the cross-node link; "
        "the engine's watchdog then reports `RPC call to sample_tokens timed out`",
        fix="install NCCL 2.30.4 or newer in every venv (pip install -U nvidia-nccl-cu13), or serve "
        "with `enforce_eager: true`",
        sources=("https://github.com/vllm-project/vllm/issues/52504",),
        spared_by="--enforce-eager",
        multi_node=True,
    ),
)


def signs(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The host facts the table matches, flat: kernel, cmdline, CmaFree, CmaTotal, driver, gpu, nccl."""
    details = facts.get("host_details") or {}
    gpus = (facts.get("memory") or {}).get("gpus") or []
    return {
        "kernel": details.get("kernel"),
        "cmdline": details.get("cmdline") or "",
        **(details.get("cma") or {}),
        "driver": (details.get("nvidia") or {}).get("driver"),
        "gpu": ", ".join(str(g.get("name")) for g in gpus) or None,
        "nccl": details.get("nccl"),
    }


def regression_rows(plan: Plan, facts: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """One row per known regression that matches a node (named, with its fix); one row when none does."""
    node_signs = {n: signs(f) for n, f in facts.items()}
    rows = []
    for entry in REGRESSIONS:
        if entry.multi_node and len(plan.nodes) < 2:
            continue
        hit = {n: all(w.holds(s) for w in entry.when) for n, s in node_signs.items()}
        if any(hit.values()):
            rows.append(_row(entry, plan, node_signs, hit))
    if rows:
        return rows
    return [Row("host", "known regressions", dict.fromkeys(facts, f"none of {len(REGRESSIONS)}"), True)]


def _row(entry: Regression, plan: Plan, node_signs: Mapping[str, Any], hit: Mapping[str, bool]) -> Row:
    spared = entry.spared_by is not None and entry.spared_by in plan.nodes[0].argv
    values = {n: f"MATCHES: {_evidence(entry, node_signs[n])}" if hit[n] else "no" for n in hit}
    if spared:
        note = f"matches, but the plan runs {entry.spared_by}, which avoids it. {entry.symptom}"
        return Row("host", entry.name, values, False, f"{note} (source: {', '.join(entry.sources)})", "warn")
    hint = f"{entry.symptom}. Fix: {entry.fix}. Source: {', '.join(entry.sources)}"
    return Row("host", entry.name, values, False, hint, entry.level)


def _evidence(entry: Regression, node_signs: Mapping[str, Any]) -> str:
    """What matched, as the node reported it (sizes in GiB)."""
    seen = []
    for w in entry.when:
        value = node_signs.get(w.fact)
        if w.op == "lacks":
            seen.append(f"no {w.value}")
        elif w.op == "above":
            seen.append(f"{w.fact} {_gib(value)} > {w.value} {_gib(node_signs.get(w.value))}")
        else:
            seen.append(f"{w.fact} {value}")
    return ", ".join(seen)


def _gib(value: Any) -> str:
    return f"{int(value) / (1 << 30):.1f} GiB"
