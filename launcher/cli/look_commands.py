"""Commands that look at a running cluster: status, logs, verify."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import click

from launcher.cli import candidates
from launcher.cli.reaching import reach_deployments
from launcher.cli.shared import (
    DEPLOYMENT,
    JSON,
    SPEC,
    SSH_CONFIG,
    echo,
    open_deployments,
    say_unreachable,
    unreachable_in,
)
from launcher.errors import ExitStatus, InputError

if TYPE_CHECKING:
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

    The plan is a hash of the rendered commands: a node running another plan than
    the spec's (drift) is flagged. /health alone stays 200 on a wedged engine (a
    tensor-parallel rank frozen), so the watchdog also sends a 1-token completion
    that must finish within --deadline, and reads the engine's counters on
    /metrics before and after (requests running and waiting, tokens generated):

    \b
      SERVING  the completion finished in time (or the engine is busy but
               generating)
      WEDGED   /health is 200, but nothing finished within the deadline and no
               token was generated meanwhile
      DOWN     a rank is not running, /health is not 200, or the completion failed
      unknown  a node could not be reached (named at the end, with its fix)

    Exit 0 when the cluster runs the spec's plan and serves, 4 when a node cannot
    be reached, 1 otherwise. --watch refreshes every --every seconds: redrawn in
    place on a terminal, one line per refresh when piped (with --json, one JSON
    document per line). Every deployment is a list item of --json (one deployment:
    a list of one), then the endpoint.

    \b
    Examples:
      spark-launch status configs/demo.yaml
      spark-launch status cluster.yaml --json | jq '.deployments[].serving.state'
      spark-launch status cluster.yaml --watch --deadline 10
    """
    # Watching, a node that is down now must be asked again at each refresh: no connecting first.
    with reach_deployments(spec, ssh_config, deployment, reach=not watch) as chosen:
        if watch:
            from launcher.cli.status_watch import watch_status

            if len(chosen.clusters) > 1:
                raise InputError("status --watch follows one deployment", "name it with --deployment NAME")
            return watch_status(next(iter(chosen.clusters.values())), deadline, every, as_json)
        return _status(chosen, None if no_watchdog else deadline, as_json)


def _status(chosen: Reachable, deadline: float | None, as_json: bool) -> ExitStatus:
    """`status` of every chosen deployment (one is a list of one), then the endpoint; the nodes
    not reached named once, at the end."""
    from launcher.cli.fleet_output import all_serve
    from launcher.commands.status import status_document, status_fleet
    from launcher.core.reports import fleet_status_text

    found, endpoint = status_fleet(chosen, deadline)
    document = status_document(chosen.name, found, endpoint)
    echo(json.dumps(document, indent=2) if as_json else fleet_status_text(found, endpoint, time.time()))
    errors, total = unreachable_in(chosen.clusters.values())
    if errors:
        say_unreachable(errors, total, "their status is unknown")
        return ExitStatus.UNREACHABLE
    return ExitStatus.OK if all_serve(document) else ExitStatus.FAILURE


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

    A node that cannot be reached is named on stderr, the others' logs are printed, and the
    exit status is 4.

    \b
    Examples:
      spark-launch logs configs/demo.yaml -n 100
      spark-launch logs cluster.yaml -f --node spark-2
      spark-launch logs cluster.yaml --json | jq -r 'select(.node == "n2").line'
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
        errors, total = unreachable_in(chosen.clusters.values())
        said = {n: e for n, e in errors.items() if any(n in names for names in wanted.values())}
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
        if said:  # before the others' logs: a follow may never end
            say_unreachable(said, total, "their logs are not shown")
        fleet_logs(chosen, shown, lines, follow, emit)
        return ExitStatus.UNREACHABLE if said else ExitStatus.OK


@click.command()
@SPEC
@SSH_CONFIG
@DEPLOYMENT
@JSON
def verify(spec: str, ssh_config: str | None, deployment: str | None, as_json: bool) -> ExitStatus:
    """Prove the running cluster works: a completion, and prefix-cache hits that grow.

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
        # a deployment whose head was not reached is not verified: the head is what answers
        results = {n: prove(c) for n, c in chosen.clusters.items() if c.head_name not in c.unreachable}
        errors, total = unreachable_in(chosen.clusters.values())
    if as_json:
        each = [{"deployment": n, **r.as_dict()} for n, r in results.items()]
        skipped = [
            {"deployment": n, "ok": False, "verified": False} for n in chosen.clusters if n not in results
        ]
        echo(json.dumps({"cluster": chosen.name, "deployments": each + skipped}, indent=2))
    elif not chosen.multi and results:
        echo(verify_text(next(iter(results.values()))))
    elif results:
        echo("\n".join(f"== deployment {n}\n{verify_text(r)}" for n, r in results.items()))
    if errors:
        say_unreachable(errors, total, "not verified there")
        return ExitStatus.UNREACHABLE
    return ExitStatus.OK if all(r.ok for r in results.values()) else ExitStatus.FAILURE
