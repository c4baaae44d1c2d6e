"""Commands that keep a cluster serving: supervise, and diagnose when it does not."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

import click

from launcher import __version__
from launcher.cli import candidates
from launcher.cli.progress import Printer
from launcher.cli.reaching import reach_cluster
from launcher.cli.shared import (
    DEPLOYMENT,
    SPEC,
    SSH_CONFIG,
    echo,
    open_deployments,
    say_unreachable,
    secret_values,
    unreachable_in,
)
from launcher.errors import ExitStatus

if TYPE_CHECKING:
    from launcher.core.serving.supervision import Event
    from launcher.node.cluster import Reached


@click.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--events",
    type=click.Path(dir_okay=False),
    default=None,
    help="Append every event as a JSON line here [default: ~/.spark-launch/CLUSTER/supervise.jsonl].",
)
@click.option(
    "--max-restarts", type=int, default=3, show_default=True, help="Restarts allowed within --window."
)
@click.option(
    "--window", type=float, default=3600, show_default=True, help="Seconds over which restarts count."
)
@click.option(
    "--backoff", type=float, default=10, show_default=True, help="Seconds before the first restart (doubles)."
)
@click.option(
    "--max-backoff", type=float, default=300, show_default=True, help="Longest wait before a restart."
)
@click.option(
    "--interval", type=float, default=30, show_default=True, help="Seconds between watchdog probes."
)
@click.option(
    "--deadline", type=float, default=30, show_default=True, help="Seconds a 1-token completion may take."
)
@click.option("--drop-caches", is_flag=True, help="Drop the page cache on every node before each start.")
@click.option(
    "--timeout", type=float, default=900, show_default=True, help="Seconds each start may take to serve."
)
@click.option(
    "--grace", type=float, default=15, show_default=True, help="Seconds between SIGTERM and SIGKILL."
)
@click.option("--replace", is_flag=True, help="At the first start, replace a cluster running another plan.")
@click.option("--skip-check", is_flag=True, help="Start without checking that the nodes are alike (loudly).")
@click.option("--no-probe", is_flag=True, help="Check, but without each node's vLLM resolving its command.")
@DEPLOYMENT
def supervise(
    spec: str,
    ssh_config: str | None,
    deployment: str | None,
    events: str | None,
    max_restarts: int,
    window: float,
    backoff: float,
    max_backoff: float,
    interval: float,
    deadline: float,
    drop_caches: bool,
    timeout: float,
    grace: float,
    replace: bool,
    skip_check: bool,
    no_probe: bool,
) -> ExitStatus:
    """Keep the cluster serving, in the foreground (for systemd or a terminal).

    Starts the cluster unless it already runs this plan (`up`, with its check), then
    watches it: every rank through one streaming watch per node, and the head through the
    watchdog (see `status --help`) every --interval seconds. On a rank that exits, a node
    that is lost, or an engine that is wedged (or down twice in a row) it stops EVERY
    rank, optionally drops the page cache on every node, and starts the whole cluster
    again after a back-off (--backoff, doubling up to --max-backoff). Never one rank
    alone. After --max-restarts restarts within --window seconds it gives up: every rank
    stopped, exit non-zero (4 when the last trouble was an unreachable node, else 1).
    Every event is one JSON line (time, cluster, node, what, why, action) in --events;
    `tail -f` it. SIGTERM (systemctl stop) stops the cluster and exits 0; Ctrl-C stops it
    and exits 130. While it runs, `spark-launch down` counts as a death: stop the
    supervisor instead.

    \b
    Examples:
      spark-launch supervise cluster.yaml
      spark-launch supervise cluster.yaml --drop-caches --max-restarts 5
      tail -f ~/.spark-launch/spark-pair/supervise.jsonl | jq -c '{node, what}'
    """
    from launcher.core.serving.supervision import RestartPolicy
    from launcher.operations.running.starting import UpOptions
    from launcher.operations.running.supervising import SuperviseOptions, Terminated
    from launcher.operations.running.supervising import supervise as keep

    up_options = UpOptions(
        timeout=timeout,
        grace=grace,
        replace=replace,
        check=not skip_check,
        probe=not no_probe,
        drop_caches=drop_caches,
    )
    options = SuperviseOptions(
        RestartPolicy(max_restarts, window, backoff, max_backoff), interval, deadline, up_options
    )
    received: list[str] = []

    def on_signal(number: int, frame: FrameType | None) -> None:
        if received:  # already stopping: let the stop finish
            return
        received.append(signal.Signals(number).name)
        raise Terminated(received[0])

    # No connecting first: a node that is down now is what supervise waits out, not a reason to stop.
    with open_deployments(spec, ssh_config, deployment, reach=False, secrets=True) as chosen:
        values = secret_values(chosen.fleet.secrets())
        name = chosen.fleet.name if chosen.fleet.multi else next(iter(chosen.clusters.values())).spec.name
        path = Path(events or f"~/.spark-launch/{name}/supervise.jsonl").expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        printer = Printer()
        # This command's own handlers, for as long as it runs: the process may go on (tests, a
        # caller of main) and a later Ctrl-C must not reach this supervisor's.
        before = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            with path.open("a") as log:
                printer.info(f"events: {path}")
                if chosen.fleet.multi or chosen.endpoint is not None:
                    from launcher.commands.supervise import supervise_fleet

                    stopped = supervise_fleet(chosen, values, options, _sink(log, printer), printer)
                else:
                    (cluster,) = chosen.clusters.values()
                    stopped = keep(cluster, values, options, _sink(log, printer), printer)
        finally:
            for number, handler in before.items():
                signal.signal(number, handler)
    if received and received[0] == "SIGTERM":
        return ExitStatus.OK
    echo(f"stopped ({stopped.why}); {stopped.restarts} restart(s)", err=True)
    return ExitStatus.INTERRUPTED


def _sink(log: TextIO, printer: Printer) -> Callable[[Event], None]:
    """Each event as a JSON line in the log (flushed at once) and a line for people."""

    def emit(event: Event) -> None:
        log.write(event.json_line() + "\n")
        log.flush()
        printer.info(f"[{event.time[11:19]}] {event.text()}")

    return emit


@click.command()
@SPEC
@SSH_CONFIG
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="The bundle to write.")
@click.option(
    "-n", "--lines", type=int, default=300, show_default=True, help="Lines of each node's recent logs."
)
@click.option("--json", "as_json", is_flag=True, help="Print where the bundle is and what it holds, as JSON.")
@click.option(
    "--deployment",
    default=None,
    metavar="NAME",
    shell_complete=candidates.deployments,
    help="Which deployment, in a spec that holds several.",
)
def diagnose(
    spec: str, ssh_config: str | None, output: str | None, lines: int, as_json: bool, deployment: str | None
) -> ExitStatus:
    """Write everything a bug report needs into one .tar.gz, secrets taken out.

    The spec and its plan, `check --json`, `status` (with the watchdog), and from every
    node: its last two runs' logs (last --lines lines), state, `nvidia-smi -q`, `ip addr`
    and routes, RDMA devices, the kernel log's tail (dmesg), kernel, driver, vLLM and
    torch versions, memory and the engine environment (a spec that does not plan: its
    problems instead of the plan and the check). The value of every secret the spec
    names (as the running processes and this environment hold it), and anything that looks
    like a token, key or password, is replaced by <redacted>. A node that cannot be reached
    gets an error.txt instead. Attach the file to the report; look inside first with
    `tar tzf`.

    \b
    Examples:
      spark-launch diagnose cluster.yaml -o spark-pair-bundle.tar.gz
      spark-launch diagnose fleet.yaml --deployment small
      tar tzf spark-pair-bundle.tar.gz
      spark-launch diagnose cluster.yaml --json | jq -r .bundle
    """
    from launcher.commands.diagnose import collect, write_bundle

    stamp = time.strftime("%Y%m%d-%H%M%S")
    with reach_cluster(spec, ssh_config, deployment) as (cluster, problems):
        name = cluster.name.replace("/", "-")  # a deployment's name (NAME/DEPLOYMENT) names one file
        why = problems.render() if problems else None
        files = collect(cluster, spec, secret_values_present(cluster), Printer(), lines, __version__, why)
    out = output or f"spark-launch-diagnose-{name}-{stamp}.tar.gz"
    size = write_bundle(files, out, f"spark-launch-diagnose-{name}-{stamp}")
    errors, total = unreachable_in([cluster])
    if as_json:
        missing = sorted(
            p.split("/")[1] for p in files if p.startswith("nodes/") and p.endswith("/error.txt")
        )
        summary = {"bundle": out, "bytes": size, "files": sorted(files), "nodes_failed": missing}
        echo(json.dumps(summary, indent=2))
    else:
        echo(f"wrote {out} ({len(files)} files, {size / 1024:.0f} KiB)")
    if errors:  # the bundle holds what the others said; without any node it holds little
        say_unreachable(errors, total, "the bundle has only an error.txt for each")
        return ExitStatus.UNREACHABLE if len(errors) == total else ExitStatus.OK
    return ExitStatus.OK


def secret_values_present(cluster: Reached) -> dict[str, str]:
    """The spec's secrets set in this environment (diagnose runs without them too)."""
    import os

    return {n: os.environ[n] for n in cluster.reach.secrets if os.environ.get(n)}
