"""What the CLI's commands share: options, the progress printer, opening the cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click

from launcher.cli.progress import Printer
from launcher.errors import SparkLaunchError, printable

if TYPE_CHECKING:  # the node side (and fabric) is imported only by commands that reach nodes
    from launcher.commands.fleet import Deployments
    from launcher.core.terminal import Screen
    from launcher.node.cluster import Cluster

F = TypeVar("F", bound=Callable[..., Any])
SPEC = click.argument("spec", type=click.Path(dir_okay=False), metavar="SPEC.yaml")
CONNECT_TIMEOUT = click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
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


@contextmanager
def open_cluster(spec_path: str, ssh_config: str | None, reach: bool = True) -> Iterator[Cluster]:
    """Plan the spec and open SSH onto its nodes (fabric is imported only here), closed after.

    `reach`: connect to every node at once first, saying so (`Cluster.unreachable` then names
    each node that could not be reached, and no later call waits on one of them again).
    """
    from launcher.load import plan_file
    from launcher.node.cluster import Cluster
    from launcher.node.ssh import SshExecutor

    spec, plan = plan_file(spec_path)
    config = ssh_config or spec.ssh_config
    if config and not Path(config).expanduser().is_absolute() and not ssh_config:
        config = str(Path(spec_path).parent / config)
    executor = SshExecutor({n.name: n.ssh for n in spec.nodes}, config, connect_timeout())
    api_key = os.environ.get("VLLM_API_KEY") if "VLLM_API_KEY" in spec.secrets else None
    try:
        cluster = Cluster(spec, plan, executor, api_key)
        if reach:
            Printer().info(connecting(len(spec.nodes), config))
            cluster.unreachable = executor.reach(cluster.names)
        yield cluster
    finally:
        executor.close()


@contextmanager
def open_deployments(
    spec_path: str, ssh_config: str | None, deployment: str | None, reach: bool = True
) -> Iterator[Deployments]:
    """Plan every deployment of the spec and open SSH onto all their nodes, closed after.

    `reach`: connect to every node at once first, saying so; each deployment's Cluster then
    names its nodes that could not be reached (`Cluster.unreachable`).
    """
    from launcher.commands.endpoint import Endpoint
    from launcher.commands.fleet import Deployments
    from launcher.load import plan_fleet
    from launcher.node.cluster import Cluster
    from launcher.node.ssh import SshExecutor

    fleet = plan_fleet(spec_path)
    chosen = fleet.select(deployment)
    first = fleet.deployments[0].spec
    nodes = {n.name: n.ssh for d in fleet.deployments for n in d.spec.nodes}
    if fleet.endpoint is not None:
        nodes[fleet.endpoint.node.name] = fleet.endpoint.node.ssh
    config = _ssh_config(spec_path, ssh_config, first.ssh_config)
    executor = SshExecutor(nodes, config, connect_timeout())
    api_key = os.environ.get("VLLM_API_KEY") if "VLLM_API_KEY" in first.secrets else None
    try:
        clusters = {d.name: Cluster(d.spec, d.plan, executor, api_key) for d in chosen}
        if reach:
            Printer().info(connecting(len(nodes), config))
            unreachable = executor.reach(list(nodes))
            for cluster in clusters.values():
                cluster.unreachable = {n: e for n, e in unreachable.items() if n in cluster.names}
        endpoint = Endpoint(fleet.endpoint, executor, api_key) if fleet.endpoint else None
        yield Deployments(fleet, clusters, endpoint, deployment is None)
    finally:
        executor.close()


def _ssh_config(spec_path: str, given: str | None, in_spec: str | None) -> str | None:
    """The ssh_config to use: the option's, else the spec's (relative to the spec's folder)."""
    config = given or in_spec
    if config and not Path(config).expanduser().is_absolute() and not given:
        config = str(Path(spec_path).parent / config)
    return config


def connecting(count: int, ssh_config: str | None) -> str:
    """The line shown while every node is being connected to."""
    timeout = connect_timeout()
    bound = f"{timeout:g} s" if timeout else "its ConnectTimeout, else 10 s"
    return f"connecting to {count} node(s) through {ssh_config or '~/.ssh/config'} (each within {bound})"


def secret_values(names: Sequence[str]) -> dict[str, str]:
    """The secrets' values from this environment; an error naming the missing ones."""
    missing = [n for n in names if n not in os.environ]
    if missing:
        raise SparkLaunchError(
            f"secret(s) not set in this environment: {', '.join(missing)}",
            f"export {missing[0]}=... where you run spark-launch (values never reach argv or logs)",
        )
    return {n: os.environ[n] for n in names}
