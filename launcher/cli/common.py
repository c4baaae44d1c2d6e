"""What the CLI's commands share: options, the progress printer, opening the cluster."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from launcher.errors import SparkLaunchError

if TYPE_CHECKING:  # the node side (and fabric) is imported only by commands that reach nodes
    from launcher.commands.fleet import Deployments
    from launcher.node.cluster import Cluster

SPEC = click.argument("spec", type=click.Path(dir_okay=False), metavar="SPEC.yaml")
SSH_CONFIG = click.option(
    "--ssh-config",
    type=click.Path(dir_okay=False),
    default=None,
    help="ssh_config file to use (default: the spec's ssh_config, else ~/.ssh/config).",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON for scripts.")
DEPLOYMENT = click.option(
    "--deployment",
    "deployment",
    default=None,
    metavar="NAME",
    help="Only this deployment of the spec (default: every one, and the endpoint).",
)


@contextmanager
def open_deployments(spec_path: str, ssh_config: str | None, deployment: str | None) -> Iterator[Deployments]:
    """Plan every deployment of the spec and open SSH onto all their nodes, closed after."""
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
    executor = SshExecutor(nodes, _ssh_config(spec_path, ssh_config, first.ssh_config))
    api_key = os.environ.get("VLLM_API_KEY") if "VLLM_API_KEY" in first.secrets else None
    clusters = {d.name: Cluster(d.spec, d.plan, executor, api_key) for d in chosen}
    endpoint = Endpoint(fleet.endpoint, executor, api_key) if fleet.endpoint else None
    try:
        yield Deployments(fleet, clusters, endpoint, deployment is None)
    finally:
        executor.close()


def _ssh_config(spec_path: str, given: str | None, in_spec: str | None) -> str | None:
    """The ssh_config to use: the option's, else the spec's (relative to the spec's folder)."""
    config = given or in_spec
    if config and not Path(config).expanduser().is_absolute() and not given:
        config = str(Path(spec_path).parent / config)
    return config


@contextmanager
def open_cluster(spec_path: str, ssh_config: str | None) -> Iterator[Cluster]:
    """Plan the spec and open SSH onto its nodes (fabric is imported only here), closed after."""
    from launcher.load import plan_file
    from launcher.node.cluster import Cluster
    from launcher.node.ssh import SshExecutor

    spec, plan = plan_file(spec_path)
    executor = SshExecutor(
        {n.name: n.ssh for n in spec.nodes}, _ssh_config(spec_path, ssh_config, spec.ssh_config)
    )
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
