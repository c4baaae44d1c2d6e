"""What the commands print for several deployments (one deployment prints as it always did)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from launcher.cli.shared import echo
from launcher.errors import ExitStatus, SparkLaunchError

if TYPE_CHECKING:
    from launcher.commands.up import FleetUp
    from launcher.core.serving.state import DownResult
    from launcher.operations.fleet import Reachable


def up_said(result: FleetUp, cluster: str, multi: bool, as_json: bool) -> ExitStatus:
    """Print what `up` did (JSON: every deployment in a list, one deployment a list of one); raise
    the first failure."""
    if as_json:
        done = [{"deployment": n, **asdict(r)} for n, r in result.results.items()]
        failed = [{"deployment": n, "error": e.render()} for n, e in result.failed.items()]
        doc = {"cluster": cluster, "deployments": done, "failed": failed, "endpoint": result.endpoint}
        echo(json.dumps(doc, indent=2))
    elif not multi and not result.endpoint:
        for one in result.results.values():
            echo(one.message)
    else:
        for name, one in result.results.items():
            echo(f"{name}: {one.message}")
        if result.endpoint:
            echo(f"endpoint: {result.endpoint} (every model by its name)")
    for name, failure in result.failed.items():
        if not multi:
            raise failure
        raise SparkLaunchError(f"deployment {name}: {failure.message}", failure.hint) from failure
    return ExitStatus.OK


def print_dry_run(spec: str, ssh_config: str | None, deployment: str | None, as_json: bool) -> ExitStatus:
    """`up --dry-run`: what `up` sends to each node of each chosen deployment (the spec judged as
    `up` judges it, its secrets set here included; nothing is asked of a node)."""
    from launcher.cli.shared import judged
    from launcher.core.remote import dry_run_calls
    from launcher.core.views import dry_run_json, dry_run_text, endpoint_dict, endpoint_text
    from launcher.node.unit import unit_sha

    judgement = judged(spec, ssh_config, secrets=True, connect=False)
    if judgement.fleet is None:
        assert judgement.pending is not None
        raise judgement.pending  # what only the head could settle: a dry run asks no node
    fleet = judgement.fleet
    chosen = fleet.select(deployment)
    endpoint = fleet.endpoint if deployment is None else None
    if as_json:  # every deployment in a list (one deployment: a list of one), then the endpoint
        docs = [json.loads(dry_run_json(d.plan, dry_run_calls(d.spec, d.plan, unit_sha()))) for d in chosen]
        named = [{"deployment": d.name, **doc} for d, doc in zip(chosen, docs, strict=True)]
        end = {"endpoint": endpoint_dict(endpoint)} if endpoint else {}
        echo(json.dumps({"cluster": fleet.name, "deployments": named, **end}, indent=2))
        return ExitStatus.OK
    for d in chosen:
        echo(dry_run_text(d.plan, dry_run_calls(d.spec, d.plan, unit_sha())))
    if endpoint is not None:
        echo("\n" + endpoint_text(endpoint))
    return ExitStatus.OK


def down_said(chosen: Reachable, results: dict[str, DownResult], as_json: bool) -> ExitStatus:
    """What `down` left (JSON on request: every deployment in a list); exit 4 naming each node not
    reached once, 1 when a process survived SIGKILL."""
    from launcher.cli.shared import say_unreachable, unreachable_in
    from launcher.core.reports import down_dict
    from launcher.node.executor import NodeError

    if as_json:
        each = [{"deployment": n, **down_dict(chosen.clusters[n].name, r)} for n, r in results.items()]
        clean = all(d["clean"] for d in each)
        echo(json.dumps({"cluster": chosen.name, "clean": clean, "deployments": each}, indent=2))
    errors, total = unreachable_in(chosen.clusters.values())
    for result in results.values():  # a node lost after it was reached, too
        for node, why in result.unreachable.items():
            errors.setdefault(node, NodeError(node, why))
    if errors:
        reached = total - len(errors)
        say_unreachable(errors, total, "nothing was stopped" if not reached else "stopped on the others")
        return ExitStatus.UNREACHABLE
    if not all(r.clean for r in results.values()):
        if as_json:
            return ExitStatus.FAILURE
        raise SparkLaunchError("some processes survived SIGKILL", "look at them with ps on the node")
    return ExitStatus.OK


def all_serve(found: dict[str, object]) -> bool:
    """Every deployment runs its plan and serves, and so does the endpoint (when there is one)."""
    deployments = found["deployments"]
    assert isinstance(deployments, list)
    serve = all(
        d["state"] == "running" and (d["serving"] or {}).get("state", "serving") == "serving"
        for d in deployments
    )
    endpoint = found.get("endpoint")
    return serve and (not isinstance(endpoint, dict) or bool(endpoint["serving"]))
