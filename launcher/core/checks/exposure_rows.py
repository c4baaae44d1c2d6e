"""What will listen where, and with which key: `check`'s rows of the network exposure. Pure.

Every port a start opens to the network, from the plan (nothing asked of the nodes): the API
(vLLM's --host; VLLM_API_KEY guards /v1 only), the master port (torch's store, bound by vLLM on
every interface of the head for the whole run, with no key), the collective preflight's store
(the head's fabric address alone, for the ~40 s of `check`), and the endpoint (its own client
key). A row fails as a warning (reported, never blocking) where a port is open to more than
it needs: an API off loopback with no endpoint in front, an endpoint without a key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.core.checks.check_report import Row
from launcher.core.checks.connections import DEADLINE_SECONDS
from launcher.core.plan import Plan
from launcher.core.spec.deployments import API_KEY
from launcher.core.spec.sections import Spec

if TYPE_CHECKING:  # a spec with an endpoint only
    from launcher.core.endpoint_plan import EndpointPlan


def exposure_rows(spec: Spec, plan: Plan, collective: bool) -> list[Row]:
    """The API's row, then (several nodes) the master port's and the preflight store's."""
    head = plan.nodes[0]
    rows = [_api_row(spec, plan)]
    if plan.master_port is not None:
        others = ", ".join(n.name for n in plan.nodes[1:])
        said = (
            f"every interface (torch's store, bound by vLLM), the whole run, no key; firewall it to {others}"
        )
        rows.append(Row("listen", f"master port *:{plan.master_port}", {head.name: said}, True))
    if collective and len(plan.nodes) > 1:
        rows.append(
            Row(
                "listen",
                f"preflight store {head.address}:<a free port>",
                {head.name: f"{head.address} only, about {DEADLINE_SECONDS:.0f} s during check, no key"},
                True,
            )
        )
    return rows


def _api_row(spec: Spec, plan: Plan) -> Row:
    head, listen = plan.nodes[0], plan.api_listen
    where = f"*:{plan.api_port}" if listen in ("0.0.0.0", "::") else f"{listen}:{plan.api_port}"
    key = f"{API_KEY} on /v1 only" if API_KEY in spec.secrets else "no key"
    if listen == "127.0.0.1":
        front = f"the endpoint on {head.name}" if spec.endpoint_node else "nothing"
        who = f"loopback: the launcher (through SSH) and {front}"
        return Row("listen", f"API {where}", {head.name: f"{who}; {key}"}, True)
    if spec.endpoint_node is not None:
        who = f"the endpoint on {spec.endpoint_node}, and whoever else reaches {listen}"
        return Row("listen", f"API {where}", {head.name: f"{who}; {key}"}, True)
    warning = next((w for w in plan.warnings if w.startswith("the API listens")), None)
    return Row(
        "listen",
        f"API {where}",
        {head.name: f"whoever reaches it, no endpoint in front; {key}"},
        False,
        warning,
        level="warn",
    )


def endpoint_row(endpoint: EndpointPlan) -> Row:
    """The endpoint's port, and whether clients need its key."""
    node = endpoint.node
    where = f"endpoint {node.address}:{endpoint.port}"
    if endpoint.key:
        return Row("listen", where, {node.name: f"whoever reaches it; clients send {endpoint.key}"}, True)
    return Row(
        "listen",
        where,
        {node.name: "whoever reaches it; NO key (endpoint.auth: none)"},
        False,
        endpoint.warnings[0] if endpoint.warnings else None,
        level="warn",
    )
