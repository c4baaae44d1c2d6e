"""The `spark-launch` command line: thin commands over the library; errors mapped once."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import click

from launcher import __version__
from launcher.errors import ExitStatus, SparkLaunchError

SPEC = click.argument("spec", type=click.Path(dir_okay=False), metavar="SPEC.yaml")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="spark-launch")
def cli() -> None:
    """Start vLLM across several machines from ONE spec, with provably identical commands.

    \b
    Every node gets the same fully explicit `vllm serve` command (only --node-rank and
    --headless differ), with every setting vLLM would otherwise derive per node written out.

    \b
    Start here:
      spark-launch validate configs/demo.yaml
      spark-launch plan configs/qwen3-next-2x-spark.yaml
      spark-launch schema > spark-launch.schema.json
    """


@cli.command()
@SPEC
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON for scripts.")
def plan(spec: str, as_json: bool) -> None:
    """Print what would run on every node, and why, without running anything.

    \b
    For each node: the exact environment and `vllm serve` command. Then every setting
    that vLLM would derive on its own and that must agree across nodes, with the value
    decided, the flag pinning it and the reason. Secrets appear by name only.

    \b
    Examples:
      spark-launch plan configs/qwen3-next-2x-spark.yaml
      spark-launch plan cluster.yaml --json | jq '.nodes[1].argv'
    """
    from launcher.loader import plan_file
    from launcher.views import plan_json, plan_text

    _, result = plan_file(spec)
    click.echo(plan_json(result) if as_json else plan_text(result))


@cli.command()
@SPEC
def validate(spec: str) -> None:
    """Check a spec; print every problem with file:line and exit 2, or exit 0.

    \b
    Checks the keys and types, the nodes, the `serve` options against the flags of the
    pinned vLLM release, values vLLM would silently change, and the parallel sizes.

    \b
    Example:
      spark-launch validate cluster.yaml && echo ok
    """
    from launcher.loader import plan_file

    _, result = plan_file(spec)
    click.echo(f"{spec}: ok ({len(result.nodes)} node(s), vLLM {result.vllm_version}, plan {result.digest})")


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the spec, for editors and linters.

    \b
    Example (VS Code with the YAML extension):
      spark-launch schema > .vscode/spark-launch.schema.json
      # then, first line of the spec:  # yaml-language-server: $schema=.vscode/spark-launch.schema.json
    """
    from launcher.spec import spec_schema

    click.echo(json.dumps(spec_schema(), indent=2))


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI; the one place that turns errors into exit codes."""
    try:
        cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except SparkLaunchError as exc:
        click.echo(
            f"spark-launch: {exc.render()}" if exc.exit_status != ExitStatus.BAD_SPEC else exc.render(),
            err=True,
        )
        sys.exit(exc.exit_status)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitStatus.BAD_SPEC if isinstance(exc, click.UsageError) else ExitStatus.FAILURE)
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("interrupted", err=True)
        sys.exit(ExitStatus.INTERRUPTED)
    sys.exit(ExitStatus.OK)
