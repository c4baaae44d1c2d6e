"""The endpoint's row: the pinned router installed where the endpoint runs. Pure."""

from __future__ import annotations

from launcher.core.checks.check_report import Row
from launcher.core.endpoint_plan import ROUTER, ROUTER_PIN, ROUTER_VERSION, EndpointPlan
from launcher.core.router import managed, venv_of


def router_row(endpoint: EndpointPlan, version: str | None) -> Row:
    """The router's release (`version`, None: none) where the endpoint runs it from on the head:
    the pinned one, or (in the launcher's own venv) none yet, which `up` installs."""
    venv = venv_of(endpoint)
    if managed(endpoint) and version != ROUTER_VERSION:
        shown = f"not installed yet in {venv}: `up` installs {ROUTER_PIN} there"
        return Row("endpoint", "router (pinned)", {endpoint.node.name: shown}, True)
    ok = version == ROUTER_VERSION
    shown = f"{ROUTER} {version}" if version else f"no {ROUTER} in {venv}"
    hint = None
    if not ok:
        hint = (
            f"the endpoint needs {ROUTER_PIN} in endpoint.venv on {endpoint.node.name}: leave "
            "endpoint.venv out and `up` installs it, or build it there (make router-venv)"
        )
    return Row("endpoint", "router (pinned)", {endpoint.node.name: shown}, ok, hint)
