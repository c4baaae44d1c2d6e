"""What the CLI's commands share: options, the progress printer, opening the cluster."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from launcher.errors import SparkLaunchError, SpecError

if TYPE_CHECKING:  # the node side (and fabric) is imported only by commands that reach nodes
    from launcher.core.plan import Plan
    from launcher.core.spec.sections import Spec
    from launcher.node.cluster import Cluster, Reached
    from launcher.node.ssh import SshExecutor

SPEC = click.argument("spec", type=click.Path(dir_okay=False), metavar="SPEC.yaml")
SSH_CONFIG = click.option(
    "--ssh-config",
    type=click.Path(dir_okay=False),
    default=None,
    help="ssh_config file to use (default: the spec's ssh_config, else ~/.ssh/config).",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON for scripts.")


def _executor(
    spec_path: str, ssh_config: str | None, spec_config: str | None, targets: dict[str, str]
) -> SshExecutor:
    """SSH onto the nodes (fabric is imported only here); a relative spec ssh_config is the spec's."""
    from launcher.node.ssh import SshExecutor

    config = ssh_config or spec_config
    if config and not Path(config).expanduser().is_absolute() and not ssh_config:
        config = str(Path(spec_path).parent / config)
    return SshExecutor(targets, config)


@contextmanager
def open_cluster(spec_path: str, ssh_config: str | None) -> Iterator[Cluster]:
    """Plan the spec for its nodes and open SSH onto them, closed after.

    What this machine cannot read for the plan (the model's config.json, a build's flag
    catalog) is read from the head over the same SSH connection (commands.planning).
    """
    from launcher.cli.progress import Printer
    from launcher.commands.planning import plan_for_nodes
    from launcher.load import read_spec
    from launcher.node.cluster import Cluster

    document, spec = read_spec(spec_path)
    executor = _executor(spec_path, ssh_config, spec.ssh_config, {n.name: n.ssh for n in spec.nodes})
    try:
        plan, sources = plan_for_nodes(document, spec, executor, Printer())
        yield Cluster(spec, plan, executor, _api_key(spec.secrets), sources)
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
    with open_cluster(spec_path, ssh_config) as cluster:
        return cluster.spec, cluster.plan


@contextmanager
def reach_cluster(spec_path: str, ssh_config: str | None) -> Iterator[tuple[Reached, SpecError | None]]:
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
        reach, broken = reach_of(document.data)
        if reach is None:
            raise document.error(broken) from None
        click.echo(
            f"warning: {exc.render()}\n  the spec does not plan: working from what the nodes run", err=True
        )
        executor = _executor(spec_path, ssh_config, reach.ssh_config, {n.name: n.ssh for n in reach.nodes})
        cluster, problems = Reached(reach, executor, _api_key(reach.secrets)), exc
    try:
        yield cluster, problems
    finally:
        cluster.executor.close()


def _api_key(secrets: Sequence[str]) -> str | None:
    """VLLM_API_KEY's value where the spec lists it as a secret."""
    return os.environ.get("VLLM_API_KEY") if "VLLM_API_KEY" in secrets else None


def secret_values(names: Sequence[str]) -> dict[str, str]:
    """The secrets' values from this environment; an error naming the missing ones."""
    missing = [n for n in names if n not in os.environ]
    if missing:
        raise SparkLaunchError(
            f"secret(s) not set in this environment: {', '.join(missing)}",
            f"export {missing[0]}=... where you run spark-launch (values never reach argv or logs)",
        )
    return {n: os.environ[n] for n in names}
