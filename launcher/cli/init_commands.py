"""Commands that start from host names instead of a spec: init, facts."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from launcher.cli import candidates
from launcher.cli.progress import Printer
from launcher.cli.shared import JSON, connect_timeout, connecting, echo, say_unreachable, ssh_options
from launcher.core.spec.spec_checks import ssh_target_problem
from launcher.errors import ExitStatus, SparkLaunchError

if TYPE_CHECKING:
    from launcher.node.executor import Executor

HOSTS = click.option(
    "--hosts",
    required=True,
    metavar="HOST1,HOST2,...",
    shell_complete=candidates.hosts,
    help="The nodes, rank order (the first serves the API): ssh_config aliases or user@host[:port].",
)
MODEL = click.option("--model", metavar="PATH", help="The model directory, the same path on every node.")
VENV = click.option("--venv", metavar="PATH", help="The vLLM venv on the nodes (runs PATH/bin/vllm).")
IMAGE = click.option("--image", metavar="IMAGE", help="Or: the container image holding vLLM.")
SSH_CONFIG = ssh_options("ssh_config file to use (default: ~/.ssh/config); init writes it into the spec.")


def parse_hosts(text: str) -> tuple[str, ...]:
    """The hosts of --hosts; a usage error naming a bad or repeated one."""
    hosts = tuple(h.strip() for h in text.split(",") if h.strip())
    if not hosts:
        raise click.BadParameter("give at least one host", param_hint="--hosts")
    for host in hosts:
        problem = ssh_target_problem(host)
        if problem:
            raise click.BadParameter(f"{host!r} {problem}", param_hint="--hosts")
    repeated = sorted({h for h in hosts if hosts.count(h) > 1})
    if repeated:
        raise click.BadParameter(f"{repeated[0]} is given twice", param_hint="--hosts")
    return hosts


def check_install(venv: str | None, image: str | None) -> None:
    """--venv and --image exclude each other; a venv is an absolute path."""
    if venv and image:
        raise click.UsageError("give --venv or --image, not both")
    if venv and not venv.startswith("/"):
        raise click.BadParameter("must be an absolute path on the nodes", param_hint="--venv")


@contextmanager
def ssh_to(
    names: tuple[str, ...], hosts: tuple[str, ...], ssh_config: str | None, need_all: bool = False
) -> Iterator[Executor]:
    """SSH onto the hosts by node name (fabric is imported only here), closed after. `need_all`:
    refuse, naming every host not reached (each once, with its fix), before anything is asked."""
    from launcher.node.cluster import Unreachable
    from launcher.node.ssh import SshExecutor

    executor = SshExecutor(dict(zip(names, hosts, strict=True)), ssh_config, connect_timeout())
    try:
        Printer().info(connecting(len(hosts), ssh_config).replace("node(s)", "host(s)"))
        down = executor.reach(list(names))  # the hosts that fail are named together, each once
        if down and need_all:
            raise Unreachable(dict(down), len(names), "no spec was written")
        yield executor
    finally:
        executor.close()


@click.command()
@HOSTS
@MODEL
@VENV
@IMAGE
@click.option(
    "-o", "--output", default="cluster.yaml", show_default=True, help="Where to write the spec ('-': stdout)."
)
@click.option("--name", help="The cluster's name (default: the output file's name, e.g. cluster).")
@click.option("--force", is_flag=True, help="Replace the output file if it exists.")
@SSH_CONFIG
@JSON
def init(
    hosts: str,
    model: str | None,
    venv: str | None,
    image: str | None,
    output: str,
    name: str | None,
    force: bool,
    ssh_config: str | None,
    as_json: bool,
) -> ExitStatus:
    """Write a spec from host names: every value found on the nodes, commented.

    Connects to every host at once (your ssh_config: aliases, keys, host-key rules) and asks
    each: its network interfaces (addresses, link speed, the RDMA devices behind them, both
    RoCE devices of a DGX Spark port), GPUs and memory, the vLLM install, the model. Then
    tries every candidate link for real (a TCP connection from each worker to the head's
    address) and picks one that works: RDMA first, then the fastest, not the network SSH
    arrives on when another is as good. Interface names may differ per node. The serve
    settings that must agree are written out with the release's defaults, as `plan` derives
    them; tensor_parallel_size is the GPUs found; on GB10 gpu_memory_utilization is 0.85.
    With no GPU on any node (vLLM's CPU build) each node is one worker, with enforce_eager
    and a VLLM_CPU_KVCACHE_SPACE sized from its share of the free memory (nodes that share a
    machine, by boot id, share it). What it cannot decide is written as <CHOOSE> with what
    to choose from: never a guess.

    Exit 0: the spec is ready (next: sync models, check, up). 2: written, but the lines it
    lists need an edit. 4: a host cannot be reached (nothing is written).

    \b
    Examples:
      spark-launch init --hosts spark-1,spark-2 --model /models/M --venv /opt/vllm
      spark-launch init --hosts spark-1,spark-2 --image vllm/vllm-openai:v0.33.0
      spark-launch init --hosts node1,node2 --ssh-config bed/ssh_config -o -
    """
    from launcher.commands.init import init as run_init
    from launcher.core.init.draft import InitRequest

    check_install(venv, image)
    if as_json and output == "-":
        raise click.UsageError("--json and -o - both want stdout: give -o FILE with --json")
    host_list = parse_hosts(hosts)
    target = Path(output)
    if output != "-" and target.exists() and not force:
        raise SparkLaunchError(
            f"{output} exists: not replaced", "give -o OTHER.yaml, or --force to replace it"
        )
    cluster = name or (
        re.sub(r"[^a-z0-9._-]", "-", target.stem.lower()).strip("-._") if output != "-" else ""
    )
    config = str(Path(ssh_config).expanduser().absolute()) if ssh_config else None
    request = InitRequest(host_list, cluster or "cluster", model, venv, image, config)
    with ssh_to(request.names, host_list, config, need_all=True) as executor:
        result = run_init(executor, request, output if output != "-" else "cluster.yaml", Printer())
    if output == "-":
        echo(result.spec.text, nl=False)
    else:
        _write(target, result.spec.text)
    status = ExitStatus.OK if result.spec.ready else ExitStatus.BAD_SPEC
    if as_json:
        echo(json.dumps(_summary(output, result), indent=2))
        return status
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)
    where = "the spec above" if output == "-" else output
    if result.spec.ready:
        echo(f"wrote {where} in {result.seconds:.1f} s: ready. Next: {next_steps(output, result)}", err=True)
        return status
    lines = ", ".join(map(str, result.spec.choose_lines)) or "see below"
    echo(f"wrote {where}, but it needs an edit before it can run (lines {lines}):", err=True)
    for problem in result.spec.problems:
        echo(f"  {problem}", err=True)
    return status


def next_steps(output: str, result: Any) -> str:
    """What to run after a ready spec: `sync models` first when a node lacks the model."""
    spec = "SPEC" if output == "-" else output
    steps = [f"spark-launch check {spec}", f"spark-launch up {spec}"]
    if result.lacking_model:
        lacking = ", ".join(result.lacking_model)
        steps.insert(0, f"spark-launch sync models {spec} (the model is not complete on {lacking})")
    return ", then ".join(steps)


def _write(target: Path, text: str) -> None:
    """Write the spec whole or not at all."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise SparkLaunchError(f"cannot write {target}: {exc.strerror or exc}") from None


def _summary(output: str, result: Any) -> dict[str, Any]:
    chosen = result.choice.chosen
    return {
        "file": output,
        "ready": result.spec.ready,
        "problems": list(result.spec.problems),
        "choose_lines": list(result.spec.choose_lines),
        "warnings": list(result.warnings),
        "fabric": None
        if chosen is None
        else {
            link.node: {"interface": link.interface, "address": link.address, "hca": list(link.rdma)}
            for link in chosen.links
        },
        "fabric_why": list(result.choice.why),
        "fabric_others": list(result.choice.others),
        "seconds": round(result.seconds, 2),
    }


@click.command()
@HOSTS
@MODEL
@VENV
@IMAGE
@SSH_CONFIG
@JSON
def facts(
    hosts: str, model: str | None, venv: str | None, image: str | None, ssh_config: str | None, as_json: bool
) -> ExitStatus:
    """Print what each node reports about itself: the raw facts `init` decides from.

    Per node: interfaces (state, speed, addresses, the RDMA devices behind each, twins
    included), GPUs and memory, the vLLM install (the given one, or those found), the model
    (the given path checked, or the models found). Nothing is changed on the nodes. A host
    that cannot be reached is reported with the reason (exit 4). For scripts and bug reports.

    \b
    Examples:
      spark-launch facts --hosts spark-1,spark-2 --json > facts.json
      spark-launch facts --hosts spark-1 --json | jq '."spark-1".interfaces'
    """
    from launcher.commands.facts import facts as discover
    from launcher.core.init.draft import InitRequest

    check_install(venv, image)
    host_list = parse_hosts(hosts)
    config = str(Path(ssh_config).expanduser().absolute()) if ssh_config else None
    request = InitRequest(host_list, "facts", model, venv, image, config)
    with ssh_to(request.names, host_list, config) as executor:
        answers = discover(executor, request)
    out: dict[str, Any] = {}
    for (name, answer), host in zip(answers.items(), host_list, strict=True):
        out[name] = (
            {"ssh": host, **answer}
            if isinstance(answer, dict)
            else {"ssh": host, "error": answer.reason, "hint": answer.hint}
        )
    if as_json:
        echo(json.dumps(out, indent=2))
    else:
        from launcher.core.init.facts_view import facts_text

        echo(facts_text(out))
    failed = {n: a for n, a in answers.items() if not isinstance(a, dict)}
    if failed:
        say_unreachable(failed, len(answers), "no facts from them")
        return ExitStatus.UNREACHABLE
    return ExitStatus.OK
