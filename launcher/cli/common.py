"""What the CLI's commands share: options, the progress printer, opening the cluster."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from launcher.errors import SparkLaunchError, printable

if TYPE_CHECKING:  # the node side (and fabric) is imported only by commands that reach nodes
    from launcher.node.cluster import Cluster

SPEC = click.argument("spec", type=click.Path(dir_okay=False), metavar="SPEC.yaml")
SSH_CONFIG = click.option(
    "--ssh-config",
    type=click.Path(dir_okay=False),
    default=None,
    help="ssh_config file to use (default: the spec's ssh_config, else ~/.ssh/config).",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON for scripts.")


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """Print text that may hold what nodes said: control characters escaped, lines kept."""
    click.echo(printable(text), err=err, nl=nl)


@contextmanager
def open_cluster(spec_path: str, ssh_config: str | None) -> Iterator[Cluster]:
    """Plan the spec and open SSH onto its nodes (fabric is imported only here), closed after."""
    from launcher.load import plan_file
    from launcher.node.cluster import Cluster
    from launcher.node.ssh import SshExecutor

    spec, plan = plan_file(spec_path)
    config = ssh_config or spec.ssh_config
    if config and not Path(config).expanduser().is_absolute() and not ssh_config:
        config = str(Path(spec_path).parent / config)
    executor = SshExecutor({n.name: n.ssh for n in spec.nodes}, config)
    api_key = os.environ.get("VLLM_API_KEY") if "VLLM_API_KEY" in spec.secrets else None
    try:
        yield Cluster(spec, plan, executor, api_key)
    finally:
        executor.close()


def secret_values(names: Sequence[str]) -> dict[str, str]:
    """The secrets' values from this environment; an error naming the missing ones."""
    missing = [n for n in names if n not in os.environ]
    if missing:
        raise SparkLaunchError(
            f"secret(s) not set in this environment: {', '.join(missing)}",
            f"export {missing[0]}=... where you run spark-launch (values never reach argv or logs)",
        )
    return {n: os.environ[n] for n in names}
