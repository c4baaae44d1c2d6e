"""`spark-launch check`: every chosen deployment's nodes compared (`operations.gate`), in one report
with the memory they claim of a node together, and the endpoint's router."""

from __future__ import annotations

from launcher.core.checks import Report
from launcher.operations.fleet import Deployments
from launcher.operations.gate import merge_reports, run_check, with_endpoint

__all__ = ["check"]


def check(chosen: Deployments, probe: bool = True, fresh: bool = False, collective: bool = True) -> Report:
    """One report of every chosen deployment's check (each row named by its deployment when
    there are several), and the endpoint's row."""
    reports = {
        n: run_check(c, probe=probe, fresh=fresh, collective=collective) for n, c in chosen.clusters.items()
    }
    return with_endpoint(merge_reports(reports), chosen)
