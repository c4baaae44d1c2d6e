"""Results as text for people and JSON for scripts: check, status, verify, down. Pure."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from launcher.core.checks import Report
from launcher.core.serving.state import ClusterStatus, DownResult, Verification
from launcher.core.serving.watchdog import Verdict
from launcher.core.terminal import PLAIN, Screen

CACHE_KEYS = ("block_size", "mamba_block_size", "mamba_cache_mode", "enable_prefix_caching")
COLUMN = 26  # a node's column in the check table, where the screen has room


def check_text(report: Report, screen: Screen = PLAIN) -> str:
    """The check as a table: one row per item, one column per node; failures marked.

    On a screen of known width the node columns narrow to fit it (each cut value is then
    shown whole under a failing row) and hints wrap; FAIL and warn are marked on a terminal.
    """
    width = max(len(r.item) for r in report.rows) + 2
    col = _column(screen, 14 + width, len(report.nodes))
    lines = [(f"{'':<{14 + width}}" + "".join(f"{n:<{col}}" for n in report.nodes)).rstrip()]
    for r in report.rows:
        mark = "ok  " if r.ok else ("FAIL" if r.level == "fail" else "warn")
        cells = (
            "".join(f"{_cell(r.values.get(n, ''), col - 2):<{col}}" for n in report.nodes) if r.values else ""
        )
        shown = screen.paint(mark, "fail" if mark == "FAIL" else "warn") if not r.ok else mark
        lines.append(f"{shown} {r.area:<9}{r.item:<{width}}{cells}".rstrip())
        if not r.ok:  # a failing value cut to fit its column is shown whole
            for n, v in r.values.items():
                if _cell(v, col - 2) != str(v) and len(str(v)) > col - 4:
                    lines += screen.fit(f"{'':<14}{n}: ", str(v), 16 + len(n))
        for hint in r.hint.splitlines() if r.hint else ():  # a hint per node, where each has its own
            lines += screen.fit(f"{'':<14}-> ", hint, 17)
    verdict = "the nodes are alike" if report.ok else "the nodes are NOT alike"
    if report.unreachable:
        verdict = "not every node could be asked"
    verdict = verdict if report.ok else screen.paint(verdict, "fail")
    return "\n".join([*lines, "", verdict])


def _column(screen: Screen, used: int, nodes: int) -> int:
    """A node column's width: 26, narrower when the screen is narrower (never under 14)."""
    if screen.width is None or not nodes:
        return COLUMN
    return max(14, min(COLUMN, (screen.width - used) // nodes))


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


def _cell(value: Any, room: int = COLUMN - 2) -> str:
    text = "yes" if value is True else "NO" if value is False else str(value)
    return text if len(text) <= room else text[: room - 1] + "…"


def status_text(st: ClusterStatus, now: float) -> str:
    """`status` for people (`now` is the clock's time, for the ages)."""
    planned = (
        f"spec's plan {st.plan_digest}" if st.plan_digest else "the spec does not plan: as the nodes say"
    )
    gone = [n.name for n in st.nodes if not n.reachable]
    state = f"unknown: {', '.join(gone)} not reached" if gone else st.state
    lines = [f"cluster {st.cluster}: {state} ({planned})"]
    for n in st.nodes:
        if not n.reachable:  # why, and the ssh line that tests it: once, with the others not reached
            lines.append(f"  {n.name:<12} rank {n.rank}  UNREACHABLE")
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
    """`verify` for people: one line per check, then the cache config the server reports (when it
    reported one)."""
    lines = [f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}" for c in result.checks]
    info = result.cache_config
    if info:
        lines.append(
            "cache config (vllm:cache_config_info): "
            + ", ".join(f"{k}={info.get(k, '?')}" for k in CACHE_KEYS)
        )
    return "\n".join(lines)


def down_lines(result: DownResult) -> list[str]:
    """One line per node reached: what `down` stopped there, and anything left."""
    lines = []
    for name, r in result.per_node.items():
        if r.error:
            lines.append(f"{name}: FAILED: {r.error}")
            continue
        if r.containers:
            what = f"stopped {r.found} container(s), removed {r.removed}" if r.removed else ""
            what = what or "nothing running"
        elif r.found:
            what = f"stopped {r.found} process(es) in {r.groups} group(s)"
            what += f", {r.killed} needed SIGKILL" if r.killed else ""
        else:
            what = "nothing running"
        if r.remaining:
            what += f"; {r.remaining} STILL RUNNING"
        elif what != "nothing running":
            what += "; none left"
        lines.append(f"{name}: {what}")
    # A node not reached is named once, at the end, with every other one, why and the ssh line.
    return lines


def down_dict(cluster: str, result: DownResult) -> dict[str, Any]:
    """One deployment in `down --json`: per node what was stopped, the nodes not reached, and
    whether nothing is left."""
    return {"cluster": cluster, "clean": result.clean and not result.unreachable, **asdict(result)}


def fleet_status_text(found: dict[str, ClusterStatus], endpoint: dict[str, Any] | None, now: float) -> str:
    """`status` for people: each deployment's status (under its name when there are several, or
    an endpoint), then the endpoint."""
    if len(found) == 1 and endpoint is None:
        return status_text(next(iter(found.values())), now)
    lines = []
    for name, st in found.items():
        lines += [f"== deployment {name}", status_text(st, now)]
    if endpoint:
        state = "serving" if endpoint["serving"] else ("running" if endpoint["running"] else "stopped")
        models = ", ".join(endpoint["models"]) or "-"
        lines.append(f"endpoint {endpoint['url']} on {endpoint['node']}: {state}; models: {models}")
    return "\n".join(lines)
