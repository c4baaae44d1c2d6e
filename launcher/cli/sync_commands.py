"""`spark-launch sync ...`: make the nodes hold the same things the head holds."""

from __future__ import annotations

import json

import click

from launcher.cli.common import JSON, SPEC, SSH_CONFIG, Printer, open_cluster
from launcher.errors import ExitStatus


@click.group()
def sync() -> None:
    """Copy what the head holds to the nodes that lack it or hold something else.

    \b
    Examples:
      spark-launch sync images cluster.yaml    # the spec's container image
    """


@sync.command()
@SPEC
@SSH_CONFIG
@JSON
def images(spec: str, ssh_config: str | None, as_json: bool) -> ExitStatus:
    """Give every node the head's build of the spec's container image (docker runtime).

    \b
    For each node that lacks the image, or holds another build under the same name, the
    head's `docker save` is streamed through this machine's SSH connections into that
    node's `docker load`: all such nodes at once, from one save, with progress per node.
    A node whose image id (or a repo digest) already matches the head's is skipped; a
    node with too little free space where docker keeps its images is refused before
    anything is copied (loading needs about twice the image's size there). Afterwards
    `spark-launch check` finds the same image id on every node.

    \b
    An image pinned by digest (name@sha256:...) cannot be copied this way (a loaded image
    has no repo digest): pull it on each node instead.
    Exit 0 when every node holds the head's image, 1 otherwise.

    \b
    Examples:
      spark-launch sync images cluster.yaml
      spark-launch sync images cluster.yaml --json | jq '.nodes[] | {name, action}'
    """
    from launcher.commands.sync_images import sync_images

    with open_cluster(spec, ssh_config) as cluster:
        result = sync_images(cluster, Printer())
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        for node in result.nodes:
            click.echo(f"{node.name}: {node.action}: {node.detail}")
    return ExitStatus.OK if result.ok else ExitStatus.FAILURE
