"""Commands that read a spec and touch no node (plan asks the head only when told): plan,
validate, schema."""

from __future__ import annotations

import json

import click

from launcher.cli.common import SPEC, SSH_CONFIG, open_cluster
from launcher.errors import ExitStatus


@click.command()
@SPEC
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON for scripts.")
@click.option(
    "--compare-release",
    "release",
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

    \b
    For each node: the exact environment and `vllm serve` command. Then every setting
    that vLLM would derive on its own and that must agree across nodes, with the value
    decided, the flag pinning it and the reason. Secrets appear by name only.
    Offline by default: the model's config.json as this machine reads it (or as read from
    the head earlier), a committed flag catalog (or one learned from the head earlier).
    A setting whose default depends on the model's kind, when the plan cannot see the
    model, is refused with how to settle it: --from-head reads the model's config.json on
    the head node (and learns the flags of a vLLM build without a committed catalog from
    its own vLLM), or write model.kind in the spec. check and up do the same by themselves.

    \b
    --compare-release VERSION plans the spec for that release too (its own committed catalog
    and the rules' version ranges) and says what would change: flags the spec or the plan
    uses that VERSION removes or deprecates, derived settings that change (defaults the spec
    leaves to the release, and values it sets whose pinning changes), each node's command
    words, new notes, and what VERSION refuses. Nothing is asked of the nodes.

    \b
    Examples:
      spark-launch plan configs/qwen3-next-2x-spark.yaml
      spark-launch plan cluster.yaml --json | jq '.nodes[1].argv'
      spark-launch plan cluster.yaml --from-head
      spark-launch plan configs/qwen3-next-2x-spark-v032.yaml --compare-release 0.33.0
    """
    from launcher.core.views import plan_json, plan_text
    from launcher.load import plan_file

    if release is not None:
        from launcher.core.receipts.release import comparison_text
        from launcher.load import compare_file

        comparison = compare_file(spec, release)
        click.echo(json.dumps(comparison.as_dict(), indent=2) if as_json else comparison_text(comparison))
        return ExitStatus.OK
    if from_head:
        with open_cluster(spec, ssh_config) as cluster:
            result = cluster.plan
    else:
        _, result = plan_file(spec)
    click.echo(plan_json(result) if as_json else plan_text(result))
    return ExitStatus.OK


@click.command()
@SPEC
def validate(spec: str) -> ExitStatus:
    """Check a spec; print every problem with file:line and exit 2, or exit 0.

    \b
    Checks the keys and types, the nodes, the `serve` options against the flags of the
    pinned vLLM release, values vLLM would silently change, and the parallel sizes.

    \b
    Example:
      spark-launch validate cluster.yaml && echo ok
    """
    from launcher.errors import one_line
    from launcher.load import plan_file

    _, result = plan_file(spec)
    summary = f"{len(result.nodes)} node(s), vLLM {result.vllm_version}, plan {result.digest}"
    click.echo(f"{one_line(spec)}: ok ({summary})")
    return ExitStatus.OK


@click.command()
def schema() -> ExitStatus:
    """Print the JSON Schema of the spec, for editors and linters.

    \b
    Example (VS Code with the YAML extension):
      spark-launch schema > .vscode/spark-launch.schema.json
      # then, first line of the spec:  # yaml-language-server: $schema=.vscode/spark-launch.schema.json
    """
    from launcher.core.spec.sections import spec_schema

    click.echo(json.dumps(spec_schema(), indent=2))
    return ExitStatus.OK
