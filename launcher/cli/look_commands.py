"""Commands that look at a running cluster: status, logs, verify."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import click

from launcher.cli import candidates
from launcher.cli.reaching import reach_deployments
from launcher.cli.shared import DEPLOYMENT, JSON, SPEC, SSH_CONFIG, echo, open_deployments
from launcher.errors import ExitStatus, InputError

if TYPE_CHECKING:
    from launcher.node.executor import NodeError
    from launcher.operations.fleet import Reachable


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
@DEPLOYMENT
@JSON
def status(
    spec: str,
    ssh_config: str | None,
    deployment: str | None,
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
    from launcher.core.reports import status_text
    from launcher.operations.running.cluster_status import status as look

    # Watching, a node that is down now must be asked again at each refresh: no connecting first.
    with reach_deployments(spec, ssh_config, deployment, reach=not watch) as chosen:
        if watch:
            from launcher.cli.status_watch import watch_status

            if len(chosen.clusters) > 1:
                raise InputError("status --watch follows one deployment", "name it with --deployment NAME")
            return watch_status(next(iter(chosen.clusters.values())), deadline, every, as_json)
        if chosen.multi or chosen.endpoint is not None:
            return _fleet_status(chosen, None if no_watchdog else deadline, as_json)
        (cluster,) = chosen.clusters.values()
        result = look(cluster, None if no_watchdog else deadline)
        unreachable = dict(cluster.unreachable)
    echo(json.dumps(result.as_dict(), indent=2) if as_json else status_text(result, time.time()))
    serves = result.serving is None or result.serving.serving
    if unreachable:
        _say_unreachable(unreachable, len(result.nodes), "its status is unknown")
        return ExitStatus.UNREACHABLE
    return ExitStatus.OK if result.state == "running" and serves else ExitStatus.FAILURE


def _fleet_status(chosen: Reachable, deadline: float | None, as_json: bool) -> ExitStatus:
    """`status` of several deployments (or one behind the endpoint): each named, then the endpoint."""
    from launcher.cli.fleet_output import all_serve
    from launcher.commands.status import status_fleet
    from launcher.core.reports import fleet_status_text

    found = status_fleet(chosen, deadline)
    echo(json.dumps(found, indent=2) if as_json else fleet_status_text(found, time.time()))
    unreachable = {n: e for c in chosen.clusters.values() for n, e in c.unreachable.items()}
    if unreachable:
        _say_unreachable(
            unreachable, len({n for c in chosen.clusters.values() for n in c.names}), "its status is unknown"
        )
        return ExitStatus.UNREACHABLE
    return ExitStatus.OK if all_serve(found) else ExitStatus.FAILURE


@click.command()
@SPEC
@SSH_CONFIG
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option(
    "--node", "nodes", multiple=True, shell_complete=candidates.nodes, help="Only this node (repeatable)."
)
@click.option(
    "-n", "--lines", type=int, default=50, show_default=True, help="Lines of each log to show first."
)
@click.option("--json", "as_json", is_flag=True, help='One JSON object a line: {"node": ..., "line": ...}.')
@DEPLOYMENT
@click.option("--endpoint", "of_endpoint", is_flag=True, help="The endpoint's log (on the head node).")
def logs(
    spec: str,
    ssh_config: str | None,
    follow: bool,
    nodes: tuple[str, ...],
    lines: int,
    as_json: bool,
    deployment: str | None,
    of_endpoint: bool,
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
    from launcher.commands.logs import endpoint_logs, fleet_logs

    with reach_deployments(spec, ssh_config, deployment) as chosen:
        known = {n for c in chosen.clusters.values() for n in c.names}
        unknown = [n for n in nodes if n not in known]
        if unknown:
            raise InputError(f"no node named {unknown[0]} in {spec}", f"nodes: {', '.join(sorted(known))}")
        if of_endpoint and chosen.endpoint is None:
            raise InputError(f"{spec} has no endpoint", "add an endpoint: section")
        wanted = {d: [n for n in c.names if not nodes or n in nodes] for d, c in chosen.clusters.items()}
        said: set[str] = set()
        for d, names in wanted.items():
            for name in (n for n in names if n in chosen.clusters[d].unreachable and n not in said):
                said.add(name)
                echo(f"spark-launch: {chosen.clusters[d].unreachable[name].render()}", err=True)
        shown = {
            d: [n for n in names if n not in chosen.clusters[d].unreachable] for d, names in wanted.items()
        }
        labels = [f"{d}/{n}" if chosen.multi else n for d, names in shown.items() for n in names]
        width = max(map(len, labels), default=0)

        def emit(node: str, line: str) -> None:
            echo(json.dumps({"node": node, "line": line}) if as_json else f"{node:>{width}} | {line}")

        if of_endpoint:
            endpoint_logs(chosen, lines, follow, emit)
            return ExitStatus.OK
        fleet_logs(chosen, shown, lines, follow, emit)
        return ExitStatus.UNREACHABLE if said else ExitStatus.OK


@click.command()
@SPEC
@SSH_CONFIG
@DEPLOYMENT
@JSON
def verify(spec: str, ssh_config: str | None, deployment: str | None, as_json: bool) -> ExitStatus:
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

    with open_deployments(spec, ssh_config, deployment) as chosen:
        results = {n: prove(c) for n, c in chosen.clusters.items()}
        unreachable = {n: e for c in chosen.clusters.values() for n, e in c.unreachable.items()}
        total = len({n for c in chosen.clusters.values() for n in c.names})
    if not chosen.fleet.multi:
        (result,) = results.values()
        echo(json.dumps(result.as_dict(), indent=2) if as_json else verify_text(result))
    elif as_json:
        echo(json.dumps({n: r.as_dict() for n, r in results.items()}, indent=2))
    else:
        echo("\n".join(f"== deployment {n}\n{verify_text(r)}" for n, r in results.items()))
    if unreachable:
        _say_unreachable(unreachable, total, "not verified there")
        return ExitStatus.UNREACHABLE
    return ExitStatus.OK if all(r.ok for r in results.values()) else ExitStatus.FAILURE


def _say_unreachable(errors: dict[str, NodeError], total: int, consequence: str) -> None:
    """Every node that could not be reached, with its reason and hint, on stderr."""
    from launcher.node.cluster import Unreachable

    echo(f"spark-launch: {Unreachable(dict(errors), total, consequence).render()}", err=True)
