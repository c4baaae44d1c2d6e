"""Rows of the network: interfaces, addresses, free ports, the head reachable from every worker. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.checks.check_report import Row, each
from launcher.core.plan import Plan
from launcher.core.spec.sections import Spec

NO_PORTS = "the head's facts did not say whether its ports are free: run check again"


def network_rows(
    spec: Spec, plan: Plan, facts: Mapping[str, Mapping[str, Any]], reach: Mapping[str, Any]
) -> list[Row]:
    """Interfaces, addresses, free ports on the head, and head reachable from every worker."""
    net = {n.name: facts[n.name].get("network", {}) for n in plan.nodes}
    rows = [
        each(
            "network",
            "interface exists",
            {n: net[n].get("interface_exists") for n in net},
            "fix the node's `interface` in the spec (ip -br link on the node lists them)",
        ),
        each(
            "network",
            "interface holds address",
            {n: net[n].get("holds_address") for n in net},
            "fix the node's `address` (it must be an IP on its `interface`: ip -br addr)",
        ),
    ]
    head = plan.nodes[0].name
    running = facts[head].get("ours_running", False)
    ports = net[head].get("ports_free")
    if ports is None:  # never left out: a port that cannot be tested is not known to be free
        rows.append(
            Row("network", f"ports free on {head}", {head: "(not reported)"}, False, NO_PORTS),
        )
    for port, free in (ports or {}).items():
        rows.append(
            Row(
                "network",
                f"port {port} free on {head}",
                {head: "in use by this cluster" if running else ("free" if free else "IN USE")},
                bool(free) or running,
                None
                if free or running
                else f"stop what holds port {port} on {head} (ss -ltnp), or "
                "change serve.port / serve.master_port",
            )
        )
    if reach:
        ok = all(v == "yes" for v in reach.values())
        # This cluster running holds the port: not tested, said, and not blocking.
        level = "warn" if running and not ok else "fail"
        hint = (
            "open the master port between the nodes (firewall), and check the head's `address` is "
            "reachable on the fabric"
        )
        rows.append(
            Row(
                "network",
                f"{head}:{plan.master_port} reachable",
                dict(reach),
                ok,
                None if ok else hint,
                level,
            )
        )
    return rows
