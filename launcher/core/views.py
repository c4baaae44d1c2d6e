"""Plans as text for people and JSON for scripts. Pure: strings in, strings out."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from launcher.core.fleet_plan import Fleet
from launcher.core.plan import LAUNCHER_ONLY, SECRET_OPTIONS, SPEC_OWNED, Plan
from launcher.core.render import pretty_command, shown_word
from launcher.core.spec.sections import spec_schema
from launcher.core.spec.versions import parse, public
from launcher.core.terminal import PLAIN, Screen
from launcher.core.vllm.catalog import Catalog
from launcher.errors import one_line

if TYPE_CHECKING:  # the dry run's calls, the endpoint's plan: a plan of one deployment needs neither
    from launcher.core.endpoint_plan import EndpointPlan
    from launcher.core.remote import Call

# Where a value comes from, as the plan's text says it in brackets.
LEGEND = "source: spec, launcher, vllm-default, model"


def editor_schema(catalogs: list[Catalog], only: str | None = None) -> dict[str, Any]:
    """The spec's JSON Schema with `serve` described per release, chosen by vllm.version (or
    vllm.flags_from); `only`: that release's `serve` for every spec, for editors without if/then."""
    from launcher.core.vllm.serve_schema import serve_schema  # `schema` only

    schema = spec_schema()
    excluded = (*LAUNCHER_ONLY, *SPEC_OWNED, *SECRET_OPTIONS)
    for catalog in catalogs:
        schema["$defs"][f"serve-{catalog.version}"] = serve_schema(catalog, excluded)
    versions = [c.version for c in catalogs]
    schema["$defs"]["VllmSection"]["properties"]["version"]["examples"] = versions
    if only is not None:
        schema["properties"]["serve"] = {"$ref": f"#/$defs/serve-{only}"}
        return schema
    schema["allOf"] = [_serve_when(v, key) for v in versions for key in ("flags_from", "version")]
    return schema


def _serve_when(version: str, key: str) -> dict[str, Any]:
    """`serve` is `version`'s when vllm.<key> names it (flags_from, when given, wins)."""
    vllm: dict[str, Any] = {"properties": {key: {"const": version}}, "required": [key]}
    if key == "version":
        vllm["not"] = {"required": ["flags_from"]}
    return {
        "if": {"properties": {"vllm": vllm}, "required": ["vllm"]},
        "then": {"properties": {"serve": {"$ref": f"#/$defs/serve-{version}"}}},
    }


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan as the JSON document `plan --json` prints."""
    return {
        "cluster": plan.cluster,
        "vllm_version": plan.vllm_version,
        "flags_from": plan.catalog_version,
        "runtime": plan.runtime,
        "digest": plan.digest,
        "nodes": [
            {
                "name": n.name,
                "rank": n.rank,
                "ssh": n.ssh,
                "address": n.address,
                "argv": list(n.argv),
                "env": n.env,
                "secrets": list(n.secrets),
            }
            for n in plan.nodes
        ],
        "derived": [
            {
                "setting": d.setting,
                "value": d.value,
                "flag": d.flag,
                "reason": d.reason,
                "source": d.source,
                **({"note": d.note} if d.note else {}),
            }
            for d in plan.derived
        ],
        "notes": list(plan.notes),
        "warnings": list(plan.warnings),
    }


def plan_json(plan: Plan) -> str:
    """`plan --json` output."""
    return json.dumps(plan_dict(plan), indent=2)


def plan_text(plan: Plan, screen: Screen = PLAIN) -> str:
    """`plan` output: each node's exact command and env, then the derived settings (and where
    each value comes from); wrapped to the screen's width when it has one."""
    out = [
        f"cluster {plan.cluster}: vLLM {plan.vllm_version} ({plan.runtime}), "
        f"{len(plan.nodes)} node(s), plan {plan.digest}"
    ]
    if parse(plan.catalog_version) != public(parse(plan.vllm_version)):  # vllm.flags_from
        out.append(
            f"  ! using the flags of vLLM {plan.catalog_version}: unsupported release, at your own risk"
        )
    for n in plan.nodes:
        role = "rank 0, serves the API" if n.rank == 0 else f"rank {n.rank}, headless"
        out += ["", f"== {n.name} ({role}) via ssh {n.ssh}"]
        out += [f"  {k}={shown_word(v)}" for k, v in n.env.items()]
        out += [f"  {name}=<secret from the launcher's environment>" for name in n.secrets]
        out.append("  " + pretty_command(n.argv).replace("\n", "\n  "))
    out += ["", *screen.fit("", f"derived settings (same on every node unless said; [{LEGEND}]):", 2)]
    width = max(len(d.setting) for d in plan.derived)
    for d in plan.derived:
        flag = d.flag or "(implied, no flag)"
        row = f"{one_line(_text(d.value))}   {one_line(flag)}   [{d.source}]"
        out += screen.fit(f"  {d.setting:<{width}}  ", row, width + 4)
        out[-1] = out[-1].removesuffix(f"[{d.source}]") + screen.paint(f"[{d.source}]", "dim")
        out += screen.fit(f"  {'':<{width}}  why: ", d.reason, width + 9)
    if plan.notes:
        out += ["", "notes:", *(f"  - {note}" for note in plan.notes)]
    if plan.warnings:
        out += ["", "warnings:"]
        for warning in plan.warnings:
            out += screen.fit(f"  {screen.paint('!', 'warn')} ", warning, 4)
    return "\n".join(out)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def dry_run_text(plan: Plan, calls: dict[str, tuple[Call, ...]]) -> str:
    """`up --dry-run`: exactly the commands `up` sends to each node, and what their stdin gets."""
    out = [f"# up {plan.cluster}: plan {plan.digest}; nothing is run"]
    for n in plan.nodes:
        out += ["", f"## {n.name} (ssh {n.ssh})"]
        for call in calls[n.name]:
            out.append(f"$ {call.command}" + (f"    # {call.about}" if call.about else ""))
            if call.script:
                out.append(f"  ({_script_of(call)})")
            if call.data is not None:
                out += ["  (stdin:)", *(f"  {line}" for line in _pretty_data(call.data).splitlines())]
        out += [
            "# which runs, detached, with the job's env:",
            "  " + pretty_command(n.argv).replace("\n", "\n  "),
        ]
    return "\n".join(out)


def _script_of(call: Call) -> str:
    """Where a script call's code comes from, in words."""
    if call.carried:
        return f"the node script {call.script}.py, from the unit {call.unit} sent on stdin"
    return (
        f"the node script {call.script}.py, from the unit {call.unit} kept on the node "
        "(sent to it first where it is not)"
    )


def dry_run_json(plan: Plan, calls: dict[str, tuple[Call, ...]]) -> str:
    """`up --dry-run --json`: the same commands and stdin as the text, for scripts."""
    nodes = [
        {
            "name": n.name,
            "ssh": n.ssh,
            "calls": [
                {
                    "command": call.command,
                    "about": call.about,
                    **({"script": call.script, "unit": call.unit} if call.script else {}),
                    "stdin": _data(call.data),
                }
                for call in calls[n.name]
            ],
            "argv": list(n.argv),
            "env": n.env,
        }
        for n in plan.nodes
    ]
    return json.dumps(
        {"cluster": plan.cluster, "digest": plan.digest, "run": False, "nodes": nodes}, indent=2
    )


def _data(data: str | None) -> Any:
    """A call's stdin data as JSON when it is JSON, else as text (None: no stdin)."""
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return data


def _pretty_data(data: str) -> str:
    try:
        return json.dumps(json.loads(data), indent=2)
    except ValueError:
        return data


def endpoint_dict(endpoint: EndpointPlan) -> dict[str, Any]:
    """The endpoint as `plan --json` prints it."""
    from launcher.core.endpoint_plan import ROUTER_PIN

    return {
        "router": ROUTER_PIN,
        "node": endpoint.node.name,
        "url": endpoint.url,
        "routes": [asdict(r) for r in endpoint.routes],
        "argv": list(endpoint.argv),
        "env": endpoint.env,
        "secrets": list(endpoint.secrets),
        "config": endpoint.config,
        "key": endpoint.key,
        "warnings": list(endpoint.warnings),
        "digest": endpoint.digest,
    }


def fleet_dict(fleet: Fleet) -> dict[str, Any]:
    """`plan --json` of a spec file: every deployment's plan in a list (one deployment: a list of
    one, named after the cluster), then the endpoint."""
    end = {"endpoint": endpoint_dict(fleet.endpoint)} if fleet.endpoint else {}
    deployments = [{"deployment": d.name, **plan_dict(d.plan)} for d in fleet.deployments]
    return {"cluster": fleet.name, "deployments": deployments, **end}


def fleet_json(fleet: Fleet) -> str:
    """`plan --json` output of a spec file."""
    return json.dumps(fleet_dict(fleet), indent=2)


def fleet_text(fleet: Fleet, screen: Screen = PLAIN) -> str:
    """`plan` output of a spec file: each deployment's plan, then the endpoint's command."""
    if not fleet.multi:
        texts = [plan_text(fleet.deployments[0].plan, screen)]
    else:
        nodes = len({n.name for d in fleet.deployments for n in d.plan.nodes})
        texts = [f"cluster {fleet.name}: {len(fleet.deployments)} deployment(s) on {nodes} node(s)"]
        for d in fleet.deployments:
            where = ", ".join(n.name for n in d.plan.nodes)
            texts.append(f"### deployment {d.name} (on {where})\n\n{plan_text(d.plan, screen)}")
    if fleet.endpoint:
        texts.append(endpoint_text(fleet.endpoint))
    return "\n\n".join(texts)


def endpoint_text(endpoint: EndpointPlan) -> str:
    """The endpoint: where it listens, what it routes where, its exact command and config."""
    from launcher.core.endpoint_plan import CONFIG_FILE, ROUTER_PIN

    key = f"clients send {endpoint.key}" if endpoint.key else "NO client key (endpoint.auth: none)"
    out = [f"### endpoint {endpoint.url} ({ROUTER_PIN} on {endpoint.node.name}), plan {endpoint.digest}"]
    out.append(f"  listens on {endpoint.node.address}:{endpoint.port}; {key}")
    out += [f"  {r.model:<20} -> {r.url}  (deployment {r.deployment})" for r in endpoint.routes]
    out += ["", f"== {endpoint.node.name} (the endpoint)"]
    out += [f"  {k}={shown_word(v)}" for k, v in endpoint.env.items()]
    out += [f"  {name}=<secret from the launcher's environment>" for name in endpoint.secrets]
    out.append("  " + pretty_command(endpoint.argv).replace("\n", "\n  "))
    out += ["", f"  {CONFIG_FILE} (in its run directory):"]
    out += [f"    {line}" for line in endpoint.config.splitlines()]
    if endpoint.warnings:
        out += ["", "warnings:", *(f"  ! {warning}" for warning in endpoint.warnings)]
    return "\n".join(out)
