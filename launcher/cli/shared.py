"""What the CLI's commands share: options, the progress printer, opening the cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click

from launcher.cli import candidates
from launcher.errors import SparkLaunchError, printable

if TYPE_CHECKING:  # the node side (and fabric) is imported only by commands that reach nodes
    from launcher.core.endpoint_plan import EndpointPlan
    from launcher.core.fleet_plan import Fleet
    from launcher.core.terminal import Screen
    from launcher.load import Judged
    from launcher.node.cluster import Cluster, Reached
    from launcher.node.executor import NodeError
    from launcher.node.ssh import SshExecutor
    from launcher.operations.fleet import Deployments

F = TypeVar("F", bound=Callable[..., Any])
SPEC = click.argument("spec", type=click.Path(dir_okay=False), metavar="SPEC.yaml")
CONNECT_TIMEOUT = click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    envvar="SPARK_LAUNCH_CONNECT_TIMEOUT",  # a site's slow links: set once, as ssh_config's ConnectTimeout is
    show_envvar=True,
    expose_value=False,
    callback=lambda ctx, _, value: ctx.meta.__setitem__("connect_timeout", value),
    help="Seconds each node may take to connect, greet, handshake and log in "
    "(default: the ssh_config's ConnectTimeout, else 10).",
)


def ssh_options(help_text: str) -> Callable[[F], F]:
    """--ssh-config (with this help) and --connect-timeout, for every command that uses SSH."""
    config = click.option("--ssh-config", type=click.Path(dir_okay=False), default=None, help=help_text)
    return lambda f: config(CONNECT_TIMEOUT(f))


SSH_CONFIG = ssh_options("ssh_config file to use (default: the spec's ssh_config, else ~/.ssh/config).")


def connect_timeout() -> float | None:
    """The --connect-timeout of the running command, if given."""
    value = click.get_current_context().meta.get("connect_timeout")
    return float(value) if value is not None else None


JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON for scripts.")
DEPLOYMENT = click.option(
    "--deployment",
    "deployment",
    default=None,
    metavar="NAME",
    shell_complete=candidates.deployments,
    help="Only this deployment of the spec (default: every one, and the endpoint).",
)


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """Print text that may hold what nodes said: control characters escaped, lines kept."""
    click.echo(printable(text), err=err, nl=nl)


def terminal(stream: TextIO | None = None) -> tuple[int | None, bool]:
    """The width of the terminal `stream` (stdout) writes to, and whether to mark failures there:
    (None, False) when it is piped or redirected, so scripts get whole, unmarked lines."""
    stream = stream if stream is not None else sys.stdout
    if not stream.isatty():
        return None, False
    import shutil  # a terminal only

    color = "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
    return shutil.get_terminal_size().columns, color


def screen(stream: TextIO | None = None) -> Screen:
    """A Screen for `stream` (stdout): its terminal's width and marks, or plain when piped."""
    from launcher.core.terminal import Screen

    return Screen(*terminal(stream))


def reach_nodes(
    executor: SshExecutor, names: list[str], ssh_config: str | None, reach: bool
) -> dict[str, NodeError]:
    """Connect to every node at once first (`reach`), saying so: each node that could not be
    reached (no later call waits on one of them again)."""
    if not reach:
        return {}
    from launcher.cli.progress import Printer

    Printer().info(connecting(len(names), ssh_config))
    return executor.reach(names)


@contextmanager
def open_cluster(spec_path: str, ssh_config: str | None, reach: bool = True) -> Iterator[Cluster]:
    """Plan the spec (one deployment) for its nodes and open SSH onto them, closed after.

    The spec is judged first, before any connection (`judged`). `reach`: connect to every node
    at once first, saying so (`Cluster.unreachable` then names each node that could not be
    reached, and no later call waits on one of them again). What this machine cannot read for
    the plan (the model's config.json, a build's flag catalog) is read from the head over the
    same connection (operations.gathering.head_planning).
    """
    from launcher.load import only

    with open_deployments(spec_path, ssh_config, None, reach) as chosen:
        only(chosen.fleet, spec_path)  # one deployment only
        yield next(iter(chosen.clusters.values()))


def judged(spec_path: str, ssh_config: str | None, secrets: bool = False, connect: bool = True) -> Judged:
    """The spec judged on this machine before any node is asked: every problem `validate` finds,
    the spec's ssh_config file (when the command `connect`s), and with `secrets` each secret it
    names set here; one report of them all (exit 2), causes first."""
    from launcher.load import judge

    return judge(spec_path, ssh_config, os.environ if secrets else None, connect=connect)


@contextmanager
def open_deployments(
    spec_path: str,
    ssh_config: str | None,
    deployment: str | None,
    reach: bool = True,
    secrets: bool = False,
) -> Iterator[Deployments]:
    """Plan every deployment of the spec for its nodes and open SSH onto all of them, closed after.

    The spec is judged first, before any connection (`judged`; `secrets`: the command needs
    their values). `reach`: connect to every node at once first, saying so; each deployment's
    Cluster then names its nodes that could not be reached (`Cluster.unreachable`). What this
    machine cannot read for a plan comes from the head (operations.gathering.head_planning).
    """
    from launcher.cli.progress import Printer
    from launcher.node.cluster import Cluster
    from launcher.node.executor import NodeError
    from launcher.operations.fleet import Deployments
    from launcher.operations.gathering.head_planning import fleet_for_nodes
    from launcher.operations.running.endpoint import Endpoint

    judgement = judged(spec_path, ssh_config, secrets)
    document, file, config = judgement.document, judgement.file, judgement.ssh_config
    nodes = {n.name: n.ssh for n in file.nodes}
    executor = ssh_executor(nodes, config)
    api_key = api_key_for(file.secrets)
    try:
        unreachable = reach_nodes(executor, list(nodes), config, reach)
        try:
            fleet, sources = fleet_for_nodes(document, executor, Printer())
        except NodeError as exc:  # a head the plan needs cannot be reached: plan without it, if it can
            if not unreachable:  # not connected first: every node tried now, each named if down
                unreachable = {exc.node: exc, **executor.reach([n for n in nodes if n != exc.node])}
            fleet, sources = _without_heads(judgement, unreachable, exc.node), {}
        chosen = {d.name for d in fleet.select(deployment)}
        every = {
            d.name: Cluster(d.spec, d.plan, executor, api_key, sources.get(d.spec.name))
            for d in fleet.deployments
        }
        for cluster in every.values():
            cluster.unreachable = {n: e for n, e in unreachable.items() if n in cluster.names}
        clusters = {n: c for n, c in every.items() if n in chosen}
        front = fleet.endpoint
        endpoint = Endpoint(front, executor, endpoint_key(front)) if front else None
        yield Deployments(fleet, clusters, endpoint, deployment is None, every)
    finally:
        executor.close()


def planned_fleet(spec_path: str, ssh_config: str | None) -> Fleet:
    """Every deployment planned: offline where the spec plans so, else for its nodes (what this
    machine lacks read from the head)."""
    judgement = judged(spec_path, ssh_config)
    if judgement.fleet is not None:
        return judgement.fleet
    with open_deployments(spec_path, ssh_config, None, reach=False) as chosen:
        return chosen.fleet


def _without_heads(judgement: Judged, unreachable: dict[str, NodeError], head: str) -> Fleet:
    """The offline plan, where a head that cannot be reached was to fill in what it lacks (the
    command then names the nodes it cannot reach, as it would); Unreachable when none plans."""
    from launcher.node.cluster import Unreachable

    if judgement.fleet is not None:
        return judgement.fleet
    raise Unreachable(
        dict(unreachable),
        len(judgement.file.nodes),
        f"the plan needs what only {head} holds (the model's config.json, or its vLLM's flags)",
    )


def ssh_executor(nodes: dict[str, str], config: str | None) -> SshExecutor:
    """SSH onto the nodes (fabric is imported only here)."""
    from launcher.node.ssh import SshExecutor

    return SshExecutor(nodes, config, connect_timeout())


def endpoint_key(endpoint: EndpointPlan) -> str | None:
    """The endpoint's client key, from this environment (None: the endpoint takes no key)."""
    return os.environ.get(endpoint.key) if endpoint.key else None


def api_key_for(secrets: Sequence[str]) -> str | None:
    """VLLM_API_KEY's value where the spec lists it as a secret."""
    return os.environ.get("VLLM_API_KEY") if "VLLM_API_KEY" in secrets else None


def connecting(count: int, ssh_config: str | None) -> str:
    """The line shown while every node is being connected to."""
    from launcher.node.ssh_failures import config_name

    timeout = connect_timeout()
    bound = f"{timeout:g} s" if timeout else "its ConnectTimeout, else 10 s"
    config = config_name(ssh_config)
    through = "without an ssh_config" if config == "no ssh_config" else f"through {config}"
    return f"connecting to {count} node(s) {through} (each within {bound})"


def unreachable_in(clusters: Iterable[Reached]) -> tuple[dict[str, SparkLaunchError], int]:
    """Every node of these clusters not reached, each once (a node in several deployments too),
    and how many nodes they have together."""
    errors: dict[str, SparkLaunchError] = {}
    names: dict[str, None] = {}
    for cluster in clusters:
        names.update(dict.fromkeys(cluster.names))
        for name, error in cluster.unreachable.items():
            errors.setdefault(name, error)
    return errors, len(names)


def say_unreachable(errors: dict[str, SparkLaunchError], total: int, consequence: str) -> None:
    """The one way every command names the nodes it could not reach, on stderr: how many, which,
    what that means for the command, then each node's reason and the `ssh` line that tests it."""
    from launcher.node.cluster import Unreachable

    echo(f"spark-launch: {Unreachable(dict(errors), total, consequence).render()}", err=True)


def secret_values(names: Sequence[str]) -> dict[str, str]:
    """The secrets' values from this environment; an error naming the missing ones."""
    missing = [n for n in names if n not in os.environ]
    if missing:
        raise SparkLaunchError(
            f"secret(s) not set in this environment: {', '.join(missing)}",
            f"export {missing[0]}=... where you run spark-launch (values never reach argv or logs)",
        )
    return {n: os.environ[n] for n in names}
