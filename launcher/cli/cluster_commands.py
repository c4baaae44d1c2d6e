"""Commands that start and stop the cluster, and the check before: check, up, down."""

from __future__ import annotations

import os

import click

from launcher.cli.fleet_output import down_said, print_dry_run, up_said
from launcher.cli.progress import Printer
from launcher.cli.reaching import reach_deployments
from launcher.cli.shared import (
    DEPLOYMENT,
    JSON,
    SPEC,
    SSH_CONFIG,
    echo,
    open_deployments,
    say_unreachable,
    screen,
    secret_values,
    unreachable_in,
)
from launcher.errors import ExitStatus


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
    "--no-collective",
    is_flag=True,
    help="Skip the collective preflight (every connection vLLM opens, then an all-reduce).",
)
@click.option(
    "--drop-caches", is_flag=True, help="sync, then drop the page cache on every node before the check."
)
@click.option(
    "--locked", is_flag=True, help="Refuse to start when a node differs from SPEC.lock (`spark-launch lock`)."
)
@DEPLOYMENT
@JSON
def up(
    spec: str,
    ssh_config: str | None,
    deployment: str | None,
    timeout: float,
    no_wait: bool,
    replace: bool,
    dry_run: bool,
    skip_check: bool,
    no_probe: bool,
    fresh: bool,
    no_collective: bool,
    drop_caches: bool,
    locked: bool,
    as_json: bool,
) -> ExitStatus:
    """Start the cluster on every node and wait until it serves.

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
      spark-launch up cluster.yaml --dry-run --json |
        jq '.deployments[0].nodes[0].calls[].command'
      spark-launch up cluster.yaml --replace --timeout 1800
      spark-launch up cluster.yaml --drop-caches
      spark-launch up cluster.yaml --locked
      spark-launch up cluster.yaml --skip-check    # not recommended
    """
    from launcher.commands.up import up_fleet
    from launcher.operations.running.starting import UpOptions

    if dry_run:
        return print_dry_run(spec, ssh_config, deployment, as_json)
    lock = None
    if locked:
        from launcher.operations.drift import read_lock

        lock = read_lock(spec)
    with open_deployments(spec, ssh_config, deployment, secrets=True) as chosen:
        for cluster in chosen.clusters.values():
            cluster.require_all("nothing was started")
        values = secret_values(chosen.fleet.secrets())
        printer = Printer()
        for warning in chosen.fleet.warnings():
            printer.info(f"warning: {warning}")
        result = up_fleet(
            chosen,
            values,
            UpOptions(
                timeout=timeout,
                wait=not no_wait,
                replace=replace,
                check=not skip_check,
                probe=not no_probe,
                fresh=fresh,
                collective=not no_collective,
                drop_caches=drop_caches,
                locked=lock,
            ),
            printer,
        )
    return up_said(result, chosen.name, chosen.fleet.multi or chosen.endpoint is not None, as_json)


@click.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--no-probe", is_flag=True, help="Skip the resolve probe (each node's vLLM deriving its config)."
)
@click.option("--fresh", is_flag=True, help="Resolve on every node even where its cached answer still holds.")
@click.option(
    "--no-collective",
    is_flag=True,
    help="Skip the collective preflight (every connection vLLM opens, then an all-reduce).",
)
@DEPLOYMENT
@JSON
def check(
    spec: str,
    ssh_config: str | None,
    no_probe: bool,
    fresh: bool,
    no_collective: bool,
    deployment: str | None,
    as_json: bool,
) -> ExitStatus:
    """Prove the nodes are alike before loading a single weight.

    \b
    Asks every node at once, over one SSH connection each, and compares in one
    table:
      vllm     the binary, release (= the spec's), build fingerprint, commit,
               python, torch; docker runtime: the image on every node, the same by
               image id or repo digest
      model    the path exists (and a local draft model's); complete (config,
               tokenizer, every indexed shard); every file the same by sha256
               (hashes cached beside the model, so an unchanged model is confirmed
               in seconds; fix: sync models)
      env      every VLLM_/NCCL_/GLOO_/HF_/CUDA_ variable vLLM will inherit
               (secrets hashed), equal except the per-node network ones
      network  interface exists and holds the address; API and master port free on
               the head; a real TCP connection from every worker to the head's
               master port
      host     kernel, NVIDIA driver and CUDA, GPU model and memory, the venv's
               NCCL, BIOS, NIC firmware, open files; FAILS on another GPU model or
               NCCL (ranks then build different KV-cache specs, or fail at the
               first collective), the rest is reported; and the known regressions
               (a kernel or driver reported to break a Spark pair), each named
               with its fix
      network  the fabric port: link up, speed, MTU (FAILS when it differs: RoCE
               runs at the path MTU), every `hca` device ACTIVE, their link layer,
               rate, both twins listed
      network  (the collective preflight; --no-collective skips it) each node's
               own vLLM Python, with exactly the env and interfaces vLLM gets,
               proves every TCP connection vLLM opens between the nodes, in its
               direction (the head into each worker's message queue, each worker
               into the head's, gloo), then times an all-reduce (gloo; NCCL too on
               GPU nodes): a node that refuses one FAILS, named, within seconds
      memory   per node: memory available and page cache, what the plan claims
               there (gpu_memory_utilization x the memory on a GPU, or the
               system's memory on unified memory such as a DGX Spark's GB10; the
               KV cache space on the CPU build), its share of the weights and one
               max_model_len sequence of KV cache. FAILS when they do not fit the
               claim, when the claim is above what is available (page cache
               included) less 4 GiB for the system, or, on unified memory, when
               only dropping the page cache would make room (`up --drop-caches`)
      probe    each node's own vLLM runs create_engine_config() on exactly its
               planned argv and env, no weights loaded: the derived settings must
               agree, and match the plan. Each node keeps its answer, keyed by
               everything that decides it (vLLM's files, python, argv, engine
               variables, the model's config and tokenizer): a repeated check is
               answered in about a second; --fresh resolves anyway (docker
               runtime: inside the image, with the container options `up` uses)
    Exit 0 when alike, 3 when the nodes disagree, 4 when a node cannot be reached.

    \b
    Examples:
      spark-launch check configs/demo.yaml
      spark-launch check cluster.yaml --json | jq '.rows[] | select(.ok | not)'
      spark-launch check cluster.yaml --no-probe --no-collective  # quick
    """
    from launcher.commands.check import check as compare
    from launcher.core.reports import check_json, check_text
    from launcher.errors import SparkLaunchError
    from launcher.operations.gate import NodesDisagree

    with open_deployments(spec, ssh_config, deployment) as chosen:
        report = compare(chosen, probe=not no_probe, fresh=fresh, collective=not no_collective)
        errors, total = unreachable_in(chosen.clusters.values())
    if as_json:
        echo(check_json(report))
        return report.exit_status
    if errors:  # nothing was compared: no table, the nodes not reached and why
        say_unreachable(errors, total, "nothing was compared")
        return ExitStatus.UNREACHABLE
    echo(check_text(report, screen()))  # the table on stdout, the verdict with the problems
    if not report.ok:
        echo(f"spark-launch: {SparkLaunchError.render(NodesDisagree(report))}", err=True)
        return report.exit_status
    return ExitStatus.OK


@click.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--grace", type=float, default=15, show_default=True, help="Seconds between SIGTERM and SIGKILL."
)
@DEPLOYMENT
@JSON
def down(
    spec: str, ssh_config: str | None, grace: float, deployment: str | None, as_json: bool
) -> ExitStatus:
    """Stop the cluster on every node, and check nothing of ours is left.

    Stops every process spark-launch started for this cluster (SIGTERM, then SIGKILL
    after --grace), found by each run's session, which no process leaves by dropping a
    variable (vLLM's workers drop the marker) or changing its group: never a process that
    is not ours. Docker runtime: stops and removes every container labelled
    spark-launch.cluster=NAME, running or stopped, and no other. Safe to run twice, and
    after a crash. Exit 0 when nothing of ours is left, 1 when a process survived SIGKILL, 4
    when a node could not be reached (the others are stopped; every such node is named).
    Needs only the spec's name, nodes and SSH: a spec that no longer plans (a typo, another
    vllm.version) is reported as a warning, and the cluster still stopped.

    \b
    Examples:
      spark-launch down configs/demo.yaml
      spark-launch down cluster.yaml --json | jq .clean
    """
    from launcher.commands.down import down_fleet

    with reach_deployments(spec, ssh_config, deployment) as chosen:
        wanted = chosen.endpoint.plan.secrets if chosen.endpoint is not None else ()
        present = {n: os.environ[n] for n in wanted if n in os.environ}  # the router's, to route anew
        results = down_fleet(chosen, grace, Printer(), present)
        return down_said(chosen, results, as_json)
