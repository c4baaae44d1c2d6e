"""The `spark-launch` command line: thin commands over the library; errors mapped once."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

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
      spark-launch validate cluster.yaml    # every problem of the spec, with file:line
      spark-launch plan cluster.yaml        # each node's exact command, and why
      spark-launch check cluster.yaml       # are the nodes alike? (vLLM, model, env, network)
      spark-launch up cluster.yaml          # check, start every rank, wait until it serves
      spark-launch status cluster.yaml      # what runs where, which plan, head health
      spark-launch logs cluster.yaml -f     # every node's log, prefixed by node
      spark-launch verify cluster.yaml      # a completion, and prefix-cache hits that grow
      spark-launch down cluster.yaml        # stop every rank (ours only)

    \b
    Exit codes: 0 ok, 1 failed, 2 bad spec or usage, 3 nodes disagree, 4 node unreachable,
    130 interrupted. Runbooks: deploy/ in the source tree. Example specs: configs/.
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


SSH_CONFIG = click.option(
    "--ssh-config",
    type=click.Path(dir_okay=False),
    default=None,
    help="ssh_config file to use (default: the spec's ssh_config, else ~/.ssh/config).",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON for scripts.")


class Printer:
    """The CLI's Reporter: one line per change, so it reads well in a terminal and in a log."""

    def __init__(self) -> None:
        self.last: dict[str, str] = {}

    def info(self, text: str) -> None:
        """A line of progress, to stderr (stdout stays clean for --json)."""
        click.echo(text, err=True)

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Print each node whose stage changed."""
        for node, stage in stages.items():
            if self.last.get(node) != stage:
                self.last[node] = stage
                self.info(f"[{elapsed:5.1f}s] {node}: {stage}")


@contextmanager
def _cluster(spec_path: str, ssh_config: str | None) -> Iterator[Any]:
    """Plan the spec and open SSH onto its nodes (fabric is imported only here), closed after."""
    import os
    from pathlib import Path

    from launcher.cluster import Cluster
    from launcher.loader import plan_file
    from launcher.ssh import SshExecutor

    spec, plan = plan_file(spec_path)
    config = ssh_config or spec.ssh_config
    if config and not Path(config).expanduser().is_absolute() and not ssh_config:
        config = str(Path(spec_path).parent / config)
    executor = SshExecutor({n.name: n.ssh for n in spec.nodes}, config)
    api_key = os.environ.get("VLLM_API_KEY") if "VLLM_API_KEY" in spec.secrets else None
    try:
        yield Cluster(spec, plan, executor, api_key)
    finally:
        executor.close()


def _secret_values(names: Sequence[str]) -> dict[str, str]:
    import os

    missing = [n for n in names if n not in os.environ]
    if missing:
        raise SparkLaunchError(
            f"secret(s) not set in this environment: {', '.join(missing)}",
            f"export {missing[0]}=... where you run spark-launch (values never reach argv or logs)",
        )
    return {n: os.environ[n] for n in names}


@cli.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--timeout", type=float, default=900, show_default=True, help="Seconds to wait for the API to serve."
)
@click.option("--no-wait", is_flag=True, help="Start every rank and return without waiting.")
@click.option("--replace", is_flag=True, help="Restart a cluster that runs a different plan.")
@click.option("--dry-run", is_flag=True, help="Print the exact remote commands; run nothing.")
@click.option("--skip-check", is_flag=True, help="Start without checking that the nodes are alike (loudly).")
@click.option("--no-probe", is_flag=True, help="Check, but without each node's vLLM resolving its command.")
@JSON
def up(
    spec: str,
    ssh_config: str | None,
    timeout: float,
    no_wait: bool,
    replace: bool,
    dry_run: bool,
    skip_check: bool,
    no_probe: bool,
    as_json: bool,
) -> None:
    """Start the cluster on every node and wait until it serves.

    \b
    First runs `check` (see `spark-launch check --help`) and refuses to start nodes that
    are not alike. Then starts the planned command on every node over SSH, detached (own process group,
    pid and log per node and run, state kept on the node), then follows every rank's log
    (started, rendezvous, loading weights, KV cache, API up) and the head's /health
    through the SSH connection. If a rank dies it says which, how and (for known
    failures) why, and stops every node: a failed `up` leaves nothing running.
    Already running with the same plan: nothing to do. Ctrl-C stops what was started.

    \b
    Examples:
      spark-launch up configs/demo.yaml
      spark-launch up cluster.yaml --dry-run
      spark-launch up cluster.yaml --replace --timeout 1800
      spark-launch up cluster.yaml --skip-check    # not recommended
    """
    from launcher.lifecycle import UpOptions
    from launcher.lifecycle import up as start

    if dry_run:
        from launcher.loader import plan_file
        from launcher.views import dry_run_text

        click.echo(dry_run_text(*plan_file(spec)))
        return
    with _cluster(spec, ssh_config) as cluster:
        values = _secret_values(cluster.plan.nodes[0].secrets)
        result = start(
            cluster,
            values,
            UpOptions(
                timeout=timeout, wait=not no_wait, replace=replace, check=not skip_check, probe=not no_probe
            ),
            Printer(),
        )
    click.echo(json.dumps(result.__dict__, indent=2) if as_json else result.message)


@cli.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--no-probe", is_flag=True, help="Skip the resolve probe (each node's vLLM deriving its config)."
)
@JSON
def check(spec: str, ssh_config: str | None, no_probe: bool, as_json: bool) -> None:
    """Prove the nodes are alike before loading a single weight.

    \b
    Asks every node at once, over one SSH connection each, and compares in one table:
      vllm     the binary, release (= the spec's), build fingerprint, commit, python, torch
      model    the path exists; config.json and tokenizer files hashed; weights by size
               (files up to 16 MiB hashed too)
      env      every VLLM_/NCCL_/GLOO_/HF_/CUDA_ variable vLLM will inherit (secrets hashed),
               equal except the per-node network ones
      network  interface exists and holds the address; API and master port free on the
               head; a real TCP connection from every worker to the head's master port
      host     GPUs (nvidia-smi) and free memory against the weights (reported, warns)
      probe    each node's own vLLM runs create_engine_config() on exactly its planned argv
               and env, no weights loaded: the derived settings must agree, and match the plan
    Exit 0 when alike, 3 when the nodes disagree, 4 when a node cannot be reached.

    \b
    Examples:
      spark-launch check configs/demo.yaml
      spark-launch check cluster.yaml --json | jq '.rows[] | select(.ok | not)'
    """
    from dataclasses import asdict

    from launcher.check import NodesDisagree, report_text, run_check

    with _cluster(spec, ssh_config) as cluster:
        report = run_check(cluster, probe=not no_probe)
    if as_json:
        rows = [asdict(r) for r in report.rows]
        click.echo(json.dumps({"ok": report.ok, "nodes": report.nodes, "rows": rows}, indent=2, default=str))
        if not report.ok:
            sys.exit(NodesDisagree(report, "").exit_status)
        return
    text = report_text(report)
    if not report.ok:
        raise NodesDisagree(report, text)
    click.echo(text)


@cli.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--grace", type=float, default=15, show_default=True, help="Seconds between SIGTERM and SIGKILL."
)
def down(spec: str, ssh_config: str | None, grace: float) -> None:
    """Stop the cluster on every node, and check nothing of ours is left.

    \b
    Stops every process group spark-launch started for this cluster (SIGTERM, then
    SIGKILL after --grace), found by a marker in their environment: never a process that
    is not ours. Safe to run twice, and after a crash.

    \b
    Example:
      spark-launch down configs/demo.yaml
    """
    from launcher.lifecycle import down as stop

    with _cluster(spec, ssh_config) as cluster:
        stop(cluster, grace, Printer())


@cli.command()
@SPEC
@SSH_CONFIG
@JSON
def status(spec: str, ssh_config: str | None, as_json: bool) -> None:
    """Show every node: running or not, pid, since when, which plan; the head's health.

    \b
    The plan is a hash of the rendered commands: a node running another plan than the
    spec's (drift) is flagged. Exit 0 when the cluster runs the spec's plan, 1 otherwise.

    \b
    Examples:
      spark-launch status configs/demo.yaml
      spark-launch status cluster.yaml --json | jq .state
    """
    from launcher.observe import status as look
    from launcher.observe import status_text

    with _cluster(spec, ssh_config) as cluster:
        result = look(cluster)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else status_text(result))
    if result.state != "running":
        sys.exit(ExitStatus.FAILURE)


@cli.command()
@SPEC
@SSH_CONFIG
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("--node", "nodes", multiple=True, help="Only this node (repeatable).")
@click.option(
    "-n", "--lines", type=int, default=50, show_default=True, help="Lines of each log to show first."
)
def logs(spec: str, ssh_config: str | None, follow: bool, nodes: tuple[str, ...], lines: int) -> None:
    """Print the nodes' logs of the current run, each line prefixed by its node.

    \b
    Examples:
      spark-launch logs configs/demo.yaml -n 100
      spark-launch logs cluster.yaml -f --node spark-2
    """
    from launcher.observe import logs as show

    with _cluster(spec, ssh_config) as cluster:
        unknown = [n for n in nodes if n not in cluster.names]
        if unknown:
            raise SparkLaunchError(
                f"no node named {unknown[0]} in {spec}", f"nodes: {', '.join(cluster.names)}"
            )
        show(cluster, list(nodes) or cluster.names, lines, follow, click.echo)


@cli.command()
@SPEC
@SSH_CONFIG
@JSON
def verify(spec: str, ssh_config: str | None, as_json: bool) -> None:
    """Prove the running cluster works: a completion, and prefix-cache hits that grow.

    \b
    Through the head's SSH connection: /v1/models, one completion, then (when the plan
    has prefix caching on) the same fresh prompt of more than one block sent up to three
    times, until vllm:prefix_cache_hits_total on /metrics grows by whole blocks. Prints
    vllm:cache_config_info as the running server sees it. Exit 1 if a check fails.

    \b
    Example:
      spark-launch verify configs/demo.yaml
    """
    from launcher.verify import verify as prove

    with _cluster(spec, ssh_config) as cluster:
        prefix = any(d.setting == "enable_prefix_caching" and d.value for d in cluster.plan.derived)
        result = prove(cluster, prefix)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        for check in result.checks:
            click.echo(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
        info = result.cache_config
        keys = ("block_size", "mamba_block_size", "mamba_cache_mode", "enable_prefix_caching")
        click.echo(
            "cache config (vllm:cache_config_info): " + ", ".join(f"{k}={info.get(k, '?')}" for k in keys)
        )
    if not result.ok:
        sys.exit(ExitStatus.FAILURE)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI; the one place that turns errors into exit codes."""
    try:
        cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except SparkLaunchError as exc:
        click.echo(f"spark-launch: {exc.render()}" if exc.prefixed else exc.render(), err=True)
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
