"""The endpoint's row: the pinned router installed where the endpoint runs. Pure."""

from __future__ import annotations

from typing import Any

from launcher.core.checks.check_report import Row
from launcher.core.endpoint_plan import ROUTER, ROUTER_PIN, ROUTER_VERSION, EndpointPlan


def router_row(endpoint: EndpointPlan, answer: dict[str, Any]) -> Row:
    """The router's release in endpoint.venv on the head: it must be the pinned one."""
    version = answer.get("version")
    ok = version == ROUTER_VERSION
    shown = f"{ROUTER} {version}" if version else f"no {ROUTER} in {endpoint.argv[0].rsplit('/bin/', 1)[0]}"
    hint = None
    if not ok:
        hint = (
            f"the endpoint needs {ROUTER_PIN} in endpoint.venv on {endpoint.node.name}: run "
            "scripts/router-venv.sh there and point endpoint.venv at the path it prints"
        )
    return Row("endpoint", "router (pinned)", {endpoint.node.name: shown}, ok, hint)
