"""Commands that look at a running cluster: status, logs, verify."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import click

from launcher.cli.common import JSON, SPEC, SSH_CONFIG, open_cluster
from launcher.errors import ExitStatus, InputError

if TYPE_CHECKING:
    from launcher.node.executor import NodeError


@click.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--deadline", type=float, default=30, show_default=True, help="Seconds a 1-token completion may take."
)
@click.option("--no-watchdog", is_flag=True, help="Only the nodes and /health: no completion, no /metrics.")
@click.option("-w", "--watch", is_flag=True, help="Refresh until Ctrl-C (in place on a terminal).")
@click.option(
    "--every", type=float, default=5, show_default=True, help="Seconds between refreshes (--watch)."
)
@JSON
def status(
    spec: str,
    ssh_config: str | None,
    deadline: float,
    no_watchdog: bool,
    watch: bool,
    every: float,
    as_json: bool,
) -> ExitStatus:
    """Show every node (running, pid, since when, which plan) and whether the head really serves.

    \b
    The plan is a hash of the rendered commands: a node running another plan than the
    spec's (drift) is flagged. /health alone stays 200 on a wedged engine (a tensor-
    parallel rank frozen), so the watchdog also sends a 1-token completion that must
    finish within --deadline, and reads the engine's counters on /metrics before and after
    (requests running and waiting, tokens generated):
      SERVING  the completion finished in time (or the engine is busy but generating)
      WEDGED   /health is 200, but nothing finished within the deadline and no token was
               generated meanwhile
      DOWN     a rank is not running, /health is not 200, or the completion failed
    Exit 0 when the cluster runs the spec's plan and serves, 4 when a node cannot be reached,
    1 otherwise. --watch refreshes
    every --every seconds: redrawn in place on a terminal, one line per refresh when piped
    (with --json, one JSON document per line).

    \b
    Examples:
      spark-launch status configs/demo.yaml
      spark-launch status cluster.yaml --json | jq .serving.state
      spark-launch status cluster.yaml --watch --deadline 10
    """
    from launcher.commands.status import status as look
    from launcher.core.reports import status_text

    # Watching, a node that is down now must be asked again at each refresh: no connecting first.
    with open_cluster(spec, ssh_config, reach=not watch) as cluster:
        if watch:
            from launcher.cli.status_watch import watch_status

            return watch_status(cluster, deadline, every, as_json)
        result = look(cluster, None if no_watchdog else deadline)
        unreachable = dict(cluster.unreachable)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else status_text(result, time.time()))
    serves = result.serving is None or result.serving.serving
    if unreachable:
        _say_unreachable(unreachable, len(result.nodes), "its status is unknown")
        return ExitStatus.UNREACHABLE
    return ExitStatus.OK if result.state == "running" and serves else ExitStatus.FAILURE


@click.command()
@SPEC
@SSH_CONFIG
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("--node", "nodes", multiple=True, help="Only this node (repeatable).")
@click.option(
    "-n", "--lines", type=int, default=50, show_default=True, help="Lines of each log to show first."
)
@click.option("--json", "as_json", is_flag=True, help='One JSON object a line: {"node": ..., "line": ...}.')
def logs(
    spec: str, ssh_config: str | None, follow: bool, nodes: tuple[str, ...], lines: int, as_json: bool
) -> ExitStatus:
    """Print the nodes' logs of the current run, each line prefixed by its node.

    \b
    A node that cannot be reached is named on stderr, the others' logs are printed, and the
    exit status is 4.

    \b
    Examples:
      spark-launch logs configs/demo.yaml -n 100
      spark-launch logs cluster.yaml -f --node spark-2
      spark-launch logs cluster.yaml --json | jq -r 'select(.node == "spark-2") | .line'
    """
    from launcher.commands.logs import logs as show

    with open_cluster(spec, ssh_config) as cluster:
        unknown = [n for n in nodes if n not in cluster.names]
        if unknown:
            raise InputError(f"no node named {unknown[0]} in {spec}", f"nodes: {', '.join(cluster.names)}")
        wanted = list(nodes) or cluster.names
        for name in wanted:
            if name in cluster.unreachable:
                click.echo(f"spark-launch: {cluster.unreachable[name].render()}", err=True)
        shown = [n for n in wanted if n not in cluster.unreachable]
        width = max(map(len, shown), default=0)

        def emit(node: str, line: str) -> None:
            click.echo(json.dumps({"node": node, "line": line}) if as_json else f"{node:>{width}} | {line}")

        show(cluster, shown, lines, follow, emit)
        return ExitStatus.UNREACHABLE if len(shown) < len(wanted) else ExitStatus.OK


@click.command()
@SPEC
@SSH_CONFIG
@JSON
def verify(spec: str, ssh_config: str | None, as_json: bool) -> ExitStatus:
    """Prove the running cluster works: a completion, and prefix-cache hits that grow.

    \b
    Through the head's SSH connection: /v1/models, one completion, then (when the plan
    has prefix caching on) the same fresh prompt of more than one block sent up to three
    times, until vllm:prefix_cache_hits_total on /metrics grows by whole blocks. Prints
    vllm:cache_config_info as the running server sees it. Exit 1 if a check fails, 4 when a
    node cannot be reached.

    \b
    Example:
      spark-launch verify configs/demo.yaml
    """
    from launcher.commands.verify import verify as prove
    from launcher.core.reports import verify_text

    with open_cluster(spec, ssh_config) as cluster:
        result = prove(cluster)
        unreachable = dict(cluster.unreachable)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else verify_text(result))
    if unreachable:
        _say_unreachable(unreachable, len(cluster.names), "not verified there")
        return ExitStatus.UNREACHABLE
    return ExitStatus.OK if result.ok else ExitStatus.FAILURE


def _say_unreachable(errors: dict[str, NodeError], total: int, consequence: str) -> None:
    """Every node that could not be reached, with its reason and hint, on stderr."""
    from launcher.node.cluster import Unreachable

    click.echo(f"spark-launch: {Unreachable(dict(errors), total, consequence).render()}", err=True)
