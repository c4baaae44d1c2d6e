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
from launcher.errors import SparkLaunchError, SpecError

if TYPE_CHECKING:  # the node side (and fabric) is imported only by commands that reach nodes
    from launcher.core.plan import Plan
    from launcher.core.spec.sections import Spec
    from launcher.core.terminal import Screen
    from launcher.node.cluster import Cluster, Reached
    from launcher.node.executor import NodeError
    from launcher.node.ssh import SshExecutor

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


def _executor(
    spec_path: str, ssh_config: str | None, spec_config: str | None, targets: dict[str, str]
) -> SshExecutor:
    """SSH onto the nodes (fabric is imported only here); a relative spec ssh_config is the spec's."""
    from launcher.node.ssh import SshExecutor

    config = ssh_config or spec_config
    if config and not Path(config).expanduser().is_absolute() and not ssh_config:
        config = str(Path(spec_path).parent / config)
    return SshExecutor(targets, config, connect_timeout())


def _reach(executor: SshExecutor, names: list[str], reach: bool) -> dict[str, NodeError]:
    """Connect to every node at once first, saying so: each node that could not be reached (no
    later call waits on one of them again)."""
    if not reach:
        return {}
    Printer().info(connecting(len(names), executor.ssh_config))
    return executor.reach(names)


@contextmanager
def open_cluster(spec_path: str, ssh_config: str | None, reach: bool = True) -> Iterator[Cluster]:
    """Plan the spec for its nodes and open SSH onto them, closed after (`reach`: connect to
    every node at once first).

    What this machine cannot read for the plan (the model's config.json, a build's flag
    catalog) is read from the head over the same SSH connection (commands.planning).
    """
    from launcher.commands.planning import plan_for_nodes
    from launcher.load import read_spec
    from launcher.node.cluster import Cluster, Unreachable
    from launcher.node.executor import NodeError

    document, spec = read_spec(spec_path)
    executor = _executor(spec_path, ssh_config, spec.ssh_config, {n.name: n.ssh for n in spec.nodes})
    try:
        unreachable = _reach(executor, [n.name for n in spec.nodes], reach)
        try:
            plan, sources = plan_for_nodes(document, spec, executor, Printer())
        except NodeError as exc:  # the plan needed the head: name every node that cannot be reached
            if not unreachable:
                raise
            raise Unreachable(dict(unreachable), len(spec.nodes), f"the plan needs {exc.node}") from None
        cluster = Cluster(spec, plan, executor, _api_key(spec.secrets), sources)
        cluster.unreachable = unreachable
        yield cluster
    finally:
        executor.close()


def planned_spec(spec_path: str, ssh_config: str | None) -> tuple[Spec, Plan]:
    """The spec and its plan: offline where it plans so, else for its nodes (what this machine
    lacks read from the head)."""
    from launcher.load import lacking_here, plan_file, read_spec

    try:
        return plan_file(spec_path)
    except SpecError:
        if not lacking_here(read_spec(spec_path)[1]):  # the head would not change the answer
            raise
    with open_cluster(spec_path, ssh_config, reach=False) as cluster:
        return cluster.spec, cluster.plan


@contextmanager
def reach_cluster(
    spec_path: str, ssh_config: str | None, reach: bool = True
) -> Iterator[tuple[Reached, SpecError | None]]:
    """The cluster as far as the spec allows, and SSH onto its nodes, closed after (down, status,
    logs, diagnose): planned offline when the spec plans; else only its name and nodes, with
    the spec's problems printed as a warning (and handed back). Only a spec whose name or
    nodes cannot be read is refused."""
    from launcher.core.spec.reach import reach_of
    from launcher.load import plan_document, read_document, validated
    from launcher.node.cluster import Cluster, Reached

    document = read_document(spec_path)
    cluster: Reached
    try:
        spec = validated(document)
        plan = plan_document(document, spec)
        executor = _executor(spec_path, ssh_config, spec.ssh_config, {n.name: n.ssh for n in spec.nodes})
        cluster, problems = Cluster(spec, plan, executor, _api_key(spec.secrets)), None
    except SpecError as exc:
        found, broken = reach_of(document.data)
        if found is None:
            raise document.error(broken) from None
        warning = f"warning: {exc.render()}\n  the spec does not plan: working from what the nodes run"
        click.echo(warning, err=True)
        executor = _executor(spec_path, ssh_config, found.ssh_config, {n.name: n.ssh for n in found.nodes})
        cluster, problems = Reached(found, executor, _api_key(found.secrets)), exc
    try:
        cluster.unreachable = _reach(executor, cluster.names, reach)
        yield cluster, problems
    finally:
        executor.close()


def _api_key(secrets: Sequence[str]) -> str | None:
    """VLLM_API_KEY's value where the spec lists it as a secret."""
    return os.environ.get("VLLM_API_KEY") if "VLLM_API_KEY" in secrets else None


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
