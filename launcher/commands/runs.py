"""`spark-launch runs`: the receipts of the cluster's runs kept on this machine, oldest first."""

from __future__ import annotations

from typing import Any

from launcher.core.receipts.content import summary
from launcher.operations.receipt_store import load_all, runs_dir

__all__ = ["runs", "runs_text"]


def runs(cluster: str) -> list[dict[str, Any]]:
    """One summary per kept receipt: run id, times, outcome, plan, evidence."""
    return [summary(r) for r in load_all(cluster)]


def runs_text(cluster: str, found: list[dict[str, Any]]) -> str:
    """The summaries as a table for people."""
    if not found:
        return f"no runs of {cluster} recorded in {runs_dir(cluster)} yet (`spark-launch up` records one)"
    lines = [f"{'run':<22} {'started':<26} {'outcome':<12} {'plan':<17} {'vllm':<12} evidence"]
    for r in found:
        evidence = f"{r['evidence']} capture(s)" if r["evidence"] else "-"
        checked = "" if r["checked"] else " (unchecked)"
        lines.append(
            f"{r['run_id']:<22} {r['started'] or '?':<26} {(r['outcome'] or '?') + checked:<12} "
            f"{r['plan'] or '?':<17} {r['vllm'] or '?':<12} {evidence}"
        )
    lines.append(f"(receipts in {runs_dir(cluster)}; `spark-launch diff SPEC` compares the last two)")
    return "\n".join(lines)
