"""Plans as text for people and JSON for scripts. Pure: strings in, strings out."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from launcher.core.plan import Plan
from launcher.core.render import pretty_command, shown_word
from launcher.errors import one_line

if TYPE_CHECKING:  # the dry run's calls: `plan` itself needs none of the node side
    from launcher.core.remote import Call


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
                **({"note": d.note} if d.note else {}),
            }
            for d in plan.derived
        ],
        "notes": list(plan.notes),
    }


def plan_json(plan: Plan) -> str:
    """`plan --json` output."""
    return json.dumps(plan_dict(plan), indent=2)


def plan_text(plan: Plan) -> str:
    """`plan` output: each node's exact command and env, then the derived settings."""
    out = [
        f"cluster {plan.cluster}: vLLM {plan.vllm_version} ({plan.runtime}), "
        f"{len(plan.nodes)} node(s), plan {plan.digest}"
    ]
    if plan.catalog_version != plan.vllm_version:
        out.append(
            f"  ! using the flags of vLLM {plan.catalog_version}: unsupported release, at your own risk"
        )
    for n in plan.nodes:
        role = "rank 0, serves the API" if n.rank == 0 else f"rank {n.rank}, headless"
        out += ["", f"== {n.name} ({role}) via ssh {n.ssh}"]
        out += [f"  {k}={shown_word(v)}" for k, v in n.env.items()]
        out += [f"  {name}=<secret from the launcher's environment>" for name in n.secrets]
        out.append("  " + pretty_command(n.argv).replace("\n", "\n  "))
    out += ["", "derived settings (same on every node unless said):"]
    width = max(len(d.setting) for d in plan.derived)
    for d in plan.derived:
        flag = d.flag or "(implied, no flag)"
        out.append(f"  {d.setting:<{width}}  {one_line(_text(d.value))}   {one_line(flag)}")
        out.append(f"  {'':<{width}}  why: {d.reason}")
    if plan.notes:
        out += ["", "notes:", *(f"  - {note}" for note in plan.notes)]
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
                out.append(f"  (stdin: the node script {call.script}.py)")
            elif call.data is not None:
                out += ["  (stdin:)", *(f"  {line}" for line in _pretty_data(call.data).splitlines())]
        out += [
            "# which runs, detached, with the job's env:",
            "  " + pretty_command(n.argv).replace("\n", "\n  "),
        ]
    return "\n".join(out)


def _pretty_data(data: str) -> str:
    try:
        return json.dumps(json.loads(data), indent=2)
    except ValueError:
        return data
