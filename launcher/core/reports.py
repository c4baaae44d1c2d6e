"""Results as text for people and JSON for scripts: check, status, verify, down. Pure."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from launcher.core.checks import Report
from launcher.core.serving.state import ClusterStatus, DownResult, Verification
from launcher.core.serving.watchdog import Verdict

CACHE_KEYS = ("block_size", "mamba_block_size", "mamba_cache_mode", "enable_prefix_caching")


def check_text(report: Report) -> str:
    """The check as a table: one row per item, one column per node; failures marked."""
    width = max(len(r.item) for r in report.rows) + 2
    col = 26
    lines = [f"{'':<8}{'':<{width}}" + "".join(f"{n:<{col}}" for n in report.nodes)]
    for r in report.rows:
        mark = "ok  " if r.ok else ("FAIL" if r.level == "fail" else "warn")
        cells = "".join(f"{_cell(r.values.get(n, '')):<{col}}" for n in report.nodes) if r.values else ""
        lines.append(f"{mark:<5}{r.area:<9}{r.item:<{width}}{cells}".rstrip())
        if not r.ok:  # a failing value cut to fit its column is shown whole
            lines += [
                f"{'':<14}{n}: {v}" for n, v in r.values.items() if _cell(v) != str(v) and len(str(v)) > 24
            ]
        if r.hint:
            lines.append(f"{'':<14}-> {r.hint}")
    verdict = "the nodes are alike" if report.ok else "the nodes are NOT alike"
    return "\n".join([*lines, "", verdict])


def check_json(report: Report) -> str:
    """`check --json`."""
    rows = [asdict(r) for r in report.rows]
    return json.dumps({"ok": report.ok, "nodes": report.nodes, "rows": rows}, indent=2, default=str)


def check_summary(report: Report) -> str:
    """One line for `up`: alike, with the warnings named."""
    warnings = [f"{r.area} {r.item}" for r in report.rows if not r.ok]
    return f"check: the nodes are alike ({len(report.rows)} rows)" + (
        f"; warnings: {', '.join(warnings)}" if warnings else ""
    )


def _cell(value: Any) -> str:
    text = "yes" if value is True else "NO" if value is False else str(value)
    return text if len(text) <= 24 else text[:23] + "…"


def status_text(st: ClusterStatus, now: float) -> str:
    """`status` for people (`now` is the clock's time, for the ages)."""
    planned = (
        f"spec's plan {st.plan_digest}" if st.plan_digest else "the spec does not plan: as the nodes say"
    )
    lines = [f"cluster {st.cluster}: {st.state} ({planned})"]
    for n in st.nodes:
        if not n.reachable:
            lines.append(f"  {n.name:<12} rank {n.rank}  UNREACHABLE: {n.error}")
            continue
        if n.running:
            age = now - (n.since or now)
            what = (
                f"running  pid {n.pid}, {n.processes} process(es), up {age:.0f} s, run {n.run_id}, "
                f"plan {n.digest}" + ("  <- NOT the spec's plan" if st.matches(n) is False else "")
            )
        elif n.run_id:
            what = f"stopped  last run {n.run_id}" + (
                f" exited {n.exit_code}" if n.exit_code is not None else ""
            )
        else:
            what = "stopped  never started here"
        lines.append(f"  {n.name:<12} rank {n.rank}  {what}")
    if st.nodes and st.nodes[0].running:
        lines.append(f"  head /health: {st.health or 'no answer'}; model: {st.model or '?'}")
    if st.serving:
        lines.append(serving_line(st.serving))
    return "\n".join(lines)


def serving_line(verdict: Verdict) -> str:
    """The watchdog's verdict in one line: state, why, and the engine's counters."""
    numbers = []
    if verdict.running is not None:
        numbers.append(f"{verdict.running:.0f} running, {verdict.waiting or 0:.0f} waiting")
    if verdict.tokens_per_second is not None:
        numbers.append(f"{verdict.tokens_per_second:.1f} tokens/s")
    tail = f" [{'; '.join(numbers)}]" if numbers else ""
    return f"  {verdict.state.upper()}: {verdict.reason}{tail}"


def verify_text(result: Verification) -> str:
    """`verify` for people: one line per check, then the cache config the server reports."""
    lines = [f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}" for c in result.checks]
    info = result.cache_config
    lines.append(
        "cache config (vllm:cache_config_info): " + ", ".join(f"{k}={info.get(k, '?')}" for k in CACHE_KEYS)
    )
    return "\n".join(lines)


def down_lines(result: DownResult) -> list[str]:
    """One line per node: what `down` stopped there, and anything left."""
    lines = []
    for name, r in result.per_node.items():
        if r.get("error"):
            lines.append(f"{name}: FAILED: {r['error']}")
            continue
        if r.get("containers"):
            what = f"stopped {r['found']} container(s), removed {r['removed']}" if r["removed"] else ""
            what = what or "nothing running"
        elif r["found"]:
            what = f"stopped {r['found']} process(es) in {r['groups']} group(s)"
            what += f", {r['killed']} needed SIGKILL" if r["killed"] else ""
        else:
            what = "nothing running"
        lines.append(f"{name}: {what}" + ("" if r["remaining"] == 0 else f"; {r['remaining']} STILL RUNNING"))
    return lines
