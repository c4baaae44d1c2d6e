"""Commands that reach the nodes: check, up, down, status, logs, verify."""

from __future__ import annotations

import json
import time

import click

from launcher.cli.common import (
    JSON,
    SPEC,
    SSH_CONFIG,
    open_cluster,
    reach_cluster,
    secret_values,
)
from launcher.cli.progress import Printer
from launcher.errors import ExitStatus, SparkLaunchError


@click.command()
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
@click.option("--fresh", is_flag=True, help="Resolve on every node even where its cached answer still holds.")
@click.option(
    "--drop-caches", is_flag=True, help="sync, then drop the page cache on every node before the check."
)
@click.option(
    "--locked", is_flag=True, help="Refuse to start when a node differs from SPEC.lock (`spark-launch lock`)."
)
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
    fresh: bool,
    drop_caches: bool,
    locked: bool,
    as_json: bool,
) -> ExitStatus:
    """Start the cluster on every node and wait until it serves.

    \b
    First runs `check` (see `spark-launch check --help`) and refuses to start nodes that
    are not alike. Then starts the planned command on every node over SSH, detached (own process group,
    pid and log per node and run, state kept on the node), then follows every rank's log
    (started, rendezvous, loading weights, KV cache, API up) and the head's /health
    through the SSH connection, then sends one completion: only that proves it serves. If
    a rank dies it says which, how and (for known failures) why, and stops every node: a
    failed `up` leaves nothing running.
    Already running with the same plan: nothing to do. Ctrl-C stops what was started.
    --drop-caches first runs `sync` and drops the page cache on every node (as root, or
    through `sudo -n`): on unified memory (DGX Spark) a cache left by the last load makes
    the next start fail its free-memory check.
    --locked first compares every node with SPEC.lock (see `spark-launch lock --help`) and
    refuses, naming what moved (a file of the model, the vLLM build, the kernel), before
    anything starts. Every start is recorded as a receipt (`spark-launch runs`).

    \b
    Examples:
      spark-launch up configs/demo.yaml
      spark-launch up cluster.yaml --dry-run
      spark-launch up cluster.yaml --replace --timeout 1800
      spark-launch up cluster.yaml --drop-caches
      spark-launch up cluster.yaml --locked
      spark-launch up cluster.yaml --skip-check    # not recommended
    """
    from launcher.commands.up import UpOptions
    from launcher.commands.up import up as start

    if dry_run:
        from launcher.core.remote import dry_run_calls
        from launcher.core.views import dry_run_text
        from launcher.load import plan_file

        planned, plan = plan_file(spec)  # offline, as `plan` (what `plan --from-head` read is kept)
        click.echo(dry_run_text(plan, dry_run_calls(planned, plan)))
        return ExitStatus.OK
    lock = None
    if locked:
        from launcher.commands.lockfile import read_lock

        lock = read_lock(spec)
    with open_cluster(spec, ssh_config) as cluster:
        values = secret_values(cluster.spec.secrets)
        result = start(
            cluster,
            values,
            UpOptions(
                timeout=timeout,
                wait=not no_wait,
                replace=replace,
                check=not skip_check,
                probe=not no_probe,
                fresh=fresh,
                drop_caches=drop_caches,
                locked=lock,
            ),
            Printer(),
        )
    click.echo(json.dumps(result.__dict__, indent=2) if as_json else result.message)
    return ExitStatus.OK


@click.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--no-probe", is_flag=True, help="Skip the resolve probe (each node's vLLM deriving its config)."
)
@click.option("--fresh", is_flag=True, help="Resolve on every node even where its cached answer still holds.")
@JSON
def check(spec: str, ssh_config: str | None, no_probe: bool, fresh: bool, as_json: bool) -> ExitStatus:
    """Prove the nodes are alike before loading a single weight.

    \b
    Asks every node at once, over one SSH connection each, and compares in one table:
      vllm     the binary, release (= the spec's), build fingerprint, commit, python, torch;
               docker runtime: the image on every node, the same by image id or repo digest
      model    the path exists (and a local draft model's); complete (config, tokenizer,
               every indexed shard); every file the same by sha256 (hashes cached beside
               the model, so an unchanged model is confirmed in seconds; fix: sync models)
      env      every VLLM_/NCCL_/GLOO_/HF_/CUDA_ variable vLLM will inherit (secrets hashed),
               equal except the per-node network ones
      network  interface exists and holds the address; API and master port free on the
               head; a real TCP connection from every worker to the head's master port
      host     GPUs (nvidia-smi), as reported
      memory   per node: memory available and page cache, what the plan claims there
               (gpu_memory_utilization x the memory on a GPU, or the system's memory on
               unified memory such as a DGX Spark's GB10; the KV cache space on the CPU
               build), its share of the weights and one max_model_len sequence of KV
               cache. FAILS when they do not fit the claim, when the claim is above what is
               available (page cache included) less 4 GiB for the system, or, on unified
               memory, when only dropping the page cache would make room (`up --drop-caches`)
      probe    each node's own vLLM runs create_engine_config() on exactly its planned argv
               and env, no weights loaded: the derived settings must agree, and match the plan.
               Each node keeps its answer, keyed by everything that decides it (vLLM's files,
               python, argv, engine variables, the model's config and tokenizer): a repeated
               check is answered in about a second; --fresh resolves anyway (docker runtime:
               inside the image, with the container options `up` uses)
    Exit 0 when alike, 3 when the nodes disagree, 4 when a node cannot be reached.

    \b
    Examples:
      spark-launch check configs/demo.yaml
      spark-launch check cluster.yaml --json | jq '.rows[] | select(.ok | not)'
    """
    from launcher.commands.check import NodesDisagree, run_check
    from launcher.core.reports import check_json, check_text

    with open_cluster(spec, ssh_config) as cluster:
        report = run_check(cluster, probe=not no_probe, fresh=fresh)
    if as_json:
        click.echo(check_json(report))
        return report.exit_status
    if not report.ok:
        raise NodesDisagree(report)
    click.echo(check_text(report))
    return ExitStatus.OK


@click.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--grace", type=float, default=15, show_default=True, help="Seconds between SIGTERM and SIGKILL."
)
def down(spec: str, ssh_config: str | None, grace: float) -> ExitStatus:
    """Stop the cluster on every node, and check nothing of ours is left.

    \b
    Stops every process group spark-launch started for this cluster (SIGTERM, then
    SIGKILL after --grace), found by a marker in their environment: never a process that
    is not ours. Docker runtime: stops and removes every container labelled
    spark-launch.cluster=NAME, running or stopped, and no other. Safe to run twice, and
    after a crash. Needs only the spec's name, nodes and SSH: a spec that no longer plans
    (a typo, another vllm.version) is reported as a warning, and the cluster still stopped.

    \b
    Example:
      spark-launch down configs/demo.yaml
    """
    from launcher.commands.down import down as stop

    with reach_cluster(spec, ssh_config) as (cluster, _):
        stop(cluster, grace, Printer())
    return ExitStatus.OK


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
    Exit 0 when the cluster runs the spec's plan and serves, 1 otherwise. A spec that does
    not plan is reported as a warning, and the nodes shown as their own state says (the
    head's API where its running command says it listens). --watch refreshes
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

    with reach_cluster(spec, ssh_config) as (cluster, _):
        if watch:
            from launcher.cli.status_watch import watch_status

            return watch_status(cluster, deadline, every, as_json)
        result = look(cluster, None if no_watchdog else deadline)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else status_text(result, time.time()))
    serves = result.serving is None or result.serving.serving
    return ExitStatus.OK if result.state == "running" and serves else ExitStatus.FAILURE


@click.command()
@SPEC
@SSH_CONFIG
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("--node", "nodes", multiple=True, help="Only this node (repeatable).")
@click.option(
    "-n", "--lines", type=int, default=50, show_default=True, help="Lines of each log to show first."
)
def logs(spec: str, ssh_config: str | None, follow: bool, nodes: tuple[str, ...], lines: int) -> ExitStatus:
    """Print the nodes' logs of the current run, each line prefixed by its node.

    \b
    Examples:
      spark-launch logs configs/demo.yaml -n 100
      spark-launch logs cluster.yaml -f --node spark-2
    """
    from launcher.commands.logs import logs as show

    with reach_cluster(spec, ssh_config) as (cluster, _):
        unknown = [n for n in nodes if n not in cluster.names]
        if unknown:
            raise SparkLaunchError(
                f"no node named {unknown[0]} in {spec}", f"nodes: {', '.join(cluster.names)}"
            )
        show(cluster, list(nodes) or cluster.names, lines, follow, click.echo)
    return ExitStatus.OK


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
    vllm:cache_config_info as the running server sees it. Exit 1 if a check fails.

    \b
    Example:
      spark-launch verify configs/demo.yaml
    """
    from launcher.commands.verify import verify as prove
    from launcher.core.reports import verify_text

    with open_cluster(spec, ssh_config) as cluster:
        result = prove(cluster)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else verify_text(result))
    return ExitStatus.OK if result.ok else ExitStatus.FAILURE
