"""Commands that read a spec and touch no node: plan, validate, schema."""

from __future__ import annotations

import json

import click

from launcher.catalogs import known_versions
from launcher.cli.shared import SPEC, SSH_CONFIG, echo, open_deployments, screen
from launcher.errors import ExitStatus, SparkLaunchError


@click.command()
@SPEC
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON for scripts.")
@click.option(
    "--compare-release",
    "release",
    type=click.Choice(known_versions()),
    metavar="VERSION",
    default=None,
    help="Preview moving to another supported vLLM release: what changes, per node.",
)
@click.option(
    "--from-head",
    is_flag=True,
    help="Read what this machine lacks (the model's config.json, a build's flag catalog) from the head node.",
)
@SSH_CONFIG
def plan(
    spec: str, as_json: bool, release: str | None, from_head: bool, ssh_config: str | None
) -> ExitStatus:
    """Print what would run on every node, and why, without running anything.

    For each node: the exact environment and `vllm serve` command. Then every setting
    that vLLM would derive on its own and that must agree across nodes, with the value
    decided, the flag pinning it and the reason. Secrets appear by name only.
    Offline by default: the model's config.json as this machine reads it (or as read from
    the head earlier), a committed flag catalog (or one learned from the head earlier).
    A setting whose default depends on the model's kind, when the plan cannot see the
    model, is refused with how to settle it: --from-head reads the model's config.json on
    the head node (and learns the flags of a vLLM build without a committed catalog from
    its own vLLM), or write model.kind in the spec. check and up do the same by themselves.

    --compare-release VERSION plans the spec for that release too (its own committed catalog
    and the rules' version ranges) and says what would change: flags the spec or the plan
    uses that VERSION removes or deprecates, derived settings that change (defaults the spec
    leaves to the release, and values it sets whose pinning changes), each node's command
    words, new notes, and what VERSION refuses. Nothing is asked of the nodes.

    \b
    Examples:
      spark-launch plan configs/qwen3-next-2x-spark.yaml
      spark-launch plan cluster.yaml --json | jq '.deployments[0].nodes[1].argv'
      spark-launch plan cluster.yaml --from-head
      spark-launch plan cluster.yaml --compare-release 0.33.0
    """
    from launcher.core.views import fleet_json, fleet_text
    from launcher.load import plan_fleet

    if release is not None:
        from launcher.core.receipts.upgrade import comparison_text
        from launcher.load import compare_file

        comparison = compare_file(spec, release)
        echo(json.dumps(comparison.as_dict(), indent=2) if as_json else comparison_text(comparison))
        return ExitStatus.OK
    if from_head:
        with open_deployments(spec, ssh_config, None, reach=False) as chosen:
            fleet = chosen.fleet
    else:
        fleet = plan_fleet(spec)
    echo(fleet_json(fleet) if as_json else fleet_text(fleet, screen()))
    return ExitStatus.OK


@click.command()
@SPEC
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and every problem as JSON.")
def validate(spec: str, as_json: bool) -> ExitStatus:
    """Check a spec; print every problem with file:line and exit 2, or exit 0.

    Checks the keys and types (a key indented under the wrong section is named as such), the
    nodes, the `serve` options against the flags of the pinned vLLM release, their values
    against that release's own types, ranges and choices (gpu_memory_utilization in (0, 1]),
    ports that clash, keys the runtime ignores, values vLLM would silently change, and the
    parallel sizes. Every problem comes with a hint.

    \b
    Examples:
      spark-launch validate cluster.yaml && echo ok
      spark-launch validate cluster.yaml --json | jq -r '.problems[].message'
    """
    from launcher.errors import SpecError, one_line
    from launcher.load import plan_fleet

    try:
        fleet = plan_fleet(spec)
    except SparkLaunchError as exc:
        if not as_json:
            raise
        problems = exc.as_dicts() if isinstance(exc, SpecError) else [_whole_file(exc)]
        echo(json.dumps({"file": spec, "ok": False, "problems": problems}, indent=2))
        return exc.exit_status
    summaries = [
        {"nodes": len(d.plan.nodes), "vllm_version": d.plan.vllm_version, "plan": d.plan.digest}
        for d in fleet.deployments
    ]
    warnings = fleet.warnings()
    if as_json:  # every deployment in a list (one deployment: a list of one)
        named = [{"deployment": d.name, **one} for d, one in zip(fleet.deployments, summaries, strict=True)]
        said = {"problems": [], "warnings": warnings}
        echo(json.dumps({"file": spec, "ok": True, "deployments": named, **said}, indent=2))
        return ExitStatus.OK
    for d, one in zip(fleet.deployments, summaries, strict=True):
        name = f" deployment {d.name}" if fleet.multi else ""
        text = f"{one['nodes']} node(s), vLLM {one['vllm_version']}, plan {one['plan']}"
        echo(f"{one_line(spec)}:{name} ok ({text})")
    for warning in warnings:
        echo(f"{one_line(spec)}: warning: {warning}", err=True)
    return ExitStatus.OK


def _whole_file(exc: SparkLaunchError) -> dict[str, object]:
    """A problem with the file itself (it cannot be read), as `validate --json` lists problems."""
    return {"line": None, "path": None, "message": exc.message, "hint": exc.hint}


@click.command()
@click.option(
    "--release",
    type=click.Choice(known_versions()),
    metavar="VERSION",
    help="Describe `serve` as this vLLM release has it, for every spec (editors without if/then).",
)
def schema(release: str | None) -> ExitStatus:
    """Print the JSON Schema of the spec, for editors and linters.

    `serve` is described per supported vLLM release, from its catalog: every option of that
    release's `vllm serve`, its type, range and choices, chosen by the spec's vllm.version
    (or vllm.flags_from). The keys the spec must not set are not in it. An editor then
    completes the options and marks a misspelt one, or 85 for gpu_memory_utilization, as
    you type; `spark-launch validate` remains the judge.

    \b
    Example (VS Code with the YAML extension):
      spark-launch schema > .vscode/spark-launch.schema.json
      # then, as the spec's first line:
      # yaml-language-server: $schema=.vscode/spark-launch.schema.json
      spark-launch schema --release 0.33.0 > spark-launch-0.33.schema.json
    """
    from launcher.catalogs import load_catalog
    from launcher.core.views import editor_schema

    echo(json.dumps(editor_schema([load_catalog(v) for v in known_versions()], release), indent=2))
    return ExitStatus.OK
