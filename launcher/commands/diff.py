"""`spark-launch diff`: what changed between two runs, or between a run and the nodes now."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launcher.core.receipts.content import snapshot
from launcher.core.receipts.run_diff import Change, diff
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.operations.gathering.gather_inputs import gathered
from launcher.operations.receipt_store import load_all, runs_dir

__all__ = ["NOW", "Side", "compare", "now_of", "pick"]

NOW = "now"
Side = tuple[str, dict[str, Any]]  # a label (run id, or `now`) and a receipt or snapshot


def pick(cluster: str, wanted: list[str], now: Callable[[], dict[str, Any]]) -> tuple[Side, Side]:
    """The two sides: by default the last two runs; with one, the last run and it (`now`: the nodes)
    or it and the last run; with two, those."""
    kept = load_all(cluster)
    if len(wanted) > 2:
        raise SparkLaunchError("diff compares two sides", "spark-launch diff SPEC [RUN_A [RUN_B]]")
    if len(wanted) < 2:
        if len(kept) < 2 - len(wanted):
            raise SparkLaunchError(
                f"{len(kept)} run(s) of {cluster} recorded in {runs_dir(cluster)}: not enough to compare",
                "`spark-launch diff SPEC now` compares the last run with what the nodes hold now",
            )
        last = str(kept[-1]["run_id"])
        if not wanted:
            wanted = [str(kept[-2]["run_id"]), last]
        else:
            wanted = [last, NOW] if wanted[0] == NOW else [wanted[0], last]
    return _side(cluster, wanted[0], kept, now), _side(cluster, wanted[1], kept, now)


def _side(cluster: str, wanted: str, kept: list[dict[str, Any]], now: Callable[[], dict[str, Any]]) -> Side:
    if wanted == NOW:
        return NOW, now()
    found = [r for r in kept if str(r.get("run_id", "")).startswith(wanted)]
    if len(found) != 1:
        known = ", ".join(str(r.get("run_id")) for r in kept[-5:]) or "none"
        what = "no run" if not found else f"{len(found)} runs"
        raise SparkLaunchError(
            f"{what} of {cluster} matching {wanted!r} (the last: {known})",
            "`spark-launch runs SPEC` lists them; give a run id (or its start), or `now`",
        )
    return str(found[0]["run_id"]), found[0]


def now_of(cluster: Cluster) -> dict[str, Any]:
    """What the nodes hold now, shaped like a receipt (the spec's plan, the nodes' facts)."""
    return snapshot(cluster.spec, cluster.plan, gathered(cluster))


def compare(sides: tuple[Side, Side]) -> list[Change]:
    """Every change from the first side to the second."""
    (_, a), (_, b) = sides
    return diff(a, b)
