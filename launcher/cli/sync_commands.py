"""`spark-launch sync ...`: make what the nodes hold identical (models, container images)."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

import click

from launcher.cli import candidates
from launcher.cli.progress import Printer
from launcher.cli.shared import JSON, SPEC, SSH_CONFIG, echo, open_cluster
from launcher.errors import ExitStatus, printable

if TYPE_CHECKING:
    from launcher.core.sync.transfer_plan import CopyProgress


@click.group()
def sync() -> None:
    """Make what every node holds identical to one node's.

    \b
    Examples:
      spark-launch sync models cluster.yaml --dry-run
      spark-launch sync models cluster.yaml
      spark-launch sync images cluster.yaml    # the spec's container image
    """


@sync.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--from",
    "source",
    metavar="NODE",
    shell_complete=candidates.nodes,
    help="Copy from this node (default: the head, rank 0).",
)
@click.option("--dry-run", is_flag=True, help="Say per node what would be copied and removed; copy nothing.")
@click.option(
    "--relay",
    is_flag=True,
    help="Pass the copy through this machine, for nodes that cannot SSH to each other (slower).",
)
@click.option("--bwlimit", type=float, metavar="MB/S", help="Limit each target's copy to this rate.")
@JSON
def models(
    spec: str,
    ssh_config: str | None,
    source: str | None,
    dry_run: bool,
    relay: bool,
    bwlimit: float | None,
    as_json: bool,
) -> ExitStatus:
    """Make every node's model directory identical to the source's, verified by content.

    The model (`model.path`) and a local draft model (`serve.speculative_config.model`)
    are compared by a manifest of every file's size and sha256, computed on each node and
    cached beside the model (keyed by size, mtime, ctime and inode: an up-to-date node is
    confirmed in seconds, and a changed file is re-hashed even if its mtime was put back).
    Before copying, each target is refused, with the numbers, when its file system is too
    small or the directory is not writable, and the source must hold a complete model
    (config.json, a tokenizer, every shard its safetensors index names).
    Each target that differs then gets, all at once: the files it lacks or holds
    differently, by rsync over SSH from the source to the target's fabric `address`
    (a shorter file is continued, not restarted: an interrupted sync resumes), files not
    on the source removed, and its manifest checked against the source's. A file rsync
    sent needs no second read there: rsync checks each against a whole-file checksum of the
    source's bytes, which the source confirms are the ones it hashed; the node hashes
    whatever is not proven so.

    The source must reach each target over SSH at its fabric address without a prompt:
    on the source, `ssh-copy-id ADDRESS` for each target (as the user the node's `ssh`
    names, if any). $RSYNC_RSH on the source, if set, replaces `ssh`. --relay needs none
    of that: the stream goes source -> this machine -> target over spark-launch's own
    connections.
    Exit 0 when every node is (or, with --dry-run, would be made) identical; 1 when a node
    is refused or a copy failed; 4 when a node cannot be reached.

    \b
    Examples:
      spark-launch sync models cluster.yaml --dry-run
      spark-launch sync models cluster.yaml
      spark-launch sync models cluster.yaml --from spark-2 --relay
      spark-launch sync models cluster.yaml --json | jq '.nodes[] | {node, state}'
    """
    from launcher.commands.sync_models import sync_models
    from launcher.core.sync.sync_report import sync_json, sync_text
    from launcher.operations.copying.sync_options import SyncOptions

    options = SyncOptions(source=source, dry_run=dry_run, relay=relay, bwlimit=bwlimit)
    with open_cluster(spec, ssh_config) as cluster:
        result = sync_models(cluster, options, TransferPrinter(sys.stderr))
    echo(sync_json(result) if as_json else sync_text(result))
    return result.exit_status


class TransferPrinter:
    """Progress: live lines redrawn in place on a terminal, plain lines now and then in a log."""

    PLAIN_EVERY = 5.0  # seconds between a node's lines when not on a terminal

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.lock = threading.Lock()
        self.rows: dict[str, CopyProgress] = {}
        self.drawn = 0  # live lines on screen below the last plain text
        self.last: dict[str, tuple[float, int]] = {}

    def info(self, text: str) -> None:
        """A line of text (above the live lines)."""
        with self.lock:
            self._erase()
            self.stream.write(printable(text) + "\n")  # may quote a node: escapes shown, not obeyed
            self._draw()

    def progress(self, node: str, progress: CopyProgress) -> None:
        """A target advanced: redraw (terminal), or a line every few seconds and every 10%."""
        with self.lock:
            self.rows[node] = progress
            if self.live:
                self._erase()
                self._draw()
                return
            when, tenth = self.last.get(node, (0.0, -1))
            now, step = time.monotonic(), 10 * progress.done // max(progress.total, 1)
            if now - when >= self.PLAIN_EVERY or step != tenth:
                self.last[node] = (now, step)
                self.stream.write(progress.line(node) + "\n")
        self.stream.flush()

    def _erase(self) -> None:
        if self.live and self.drawn:
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0

    def _draw(self) -> None:
        if self.live and self.rows:
            width = max(len(n) for n in self.rows) + 1
            self.stream.write("".join(p.line(n, width) + "\n" for n, p in self.rows.items()))
            self.drawn = len(self.rows)
        self.stream.flush()


@sync.command()
@SPEC
@SSH_CONFIG
@click.option(
    "--relay",
    is_flag=True,
    help="Pass the image through this machine, for nodes that cannot SSH to each other (slower).",
)
@JSON
def images(spec: str, ssh_config: str | None, relay: bool, as_json: bool) -> ExitStatus:
    """Give every node the head's build of the spec's container image (docker runtime).

    For each node that lacks the image, or holds another build under the same name, the
    head's `docker save` is streamed into that node's `docker load`: all such nodes at
    once, from one save, with progress per node. The stream goes node to node, from the
    head to each node's fabric `address`, through OpenSSH on the head (the link's speed:
    nothing passes through this machine). A node whose image id (or a repo digest)
    already matches the head's is skipped; a node with too little free space where docker
    keeps its images is refused before anything is copied (loading needs about twice the
    image's size there). Afterwards `spark-launch check` finds the same image id on every
    node.

    The head must reach each node over SSH at its fabric address without a prompt, as for
    `sync models`: on the head, `ssh-copy-id ADDRESS` for each node; $RSYNC_RSH on the head,
    if set, replaces `ssh`. --relay needs none of that: the stream goes head -> this
    machine -> node over spark-launch's own connections.
    An image pinned by digest (name@sha256:...) cannot be copied this way (a loaded image
    has no repo digest): pull it on each node instead.
    Exit 0 when every node holds the head's image, 1 otherwise.

    \b
    Examples:
      spark-launch sync images cluster.yaml
      spark-launch sync images cluster.yaml --relay
      spark-launch sync images cluster.yaml --json | jq '.nodes[].action'
    """
    from launcher.commands.sync_images import sync_images

    with open_cluster(spec, ssh_config) as cluster:
        result = sync_images(cluster, Printer(), relay=relay)
    if as_json:
        echo(json.dumps(result.as_dict(), indent=2))
    else:
        for node in result.nodes:
            echo(f"{node.name}: {node.action}: {node.detail}")
    return ExitStatus.OK if result.ok else ExitStatus.FAILURE
