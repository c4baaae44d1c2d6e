"""`spark-launch sync images`: give every node the head's build of the spec's image.

The head's `docker save` streams into `docker load` on each node that lacks the image or
holds another build under that name, all at once (one save feeds them all): node to node
over OpenSSH by default, through the launcher's SSH connections with `relay`
(`sync.image_copy`). A node whose image id or a repo digest already matches the head's is
skipped; a node short of disk space is refused before anything is copied.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from launcher.core.answers.facts_answer import ImageFacts
from launcher.errors import InputError, SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import fan_out
from launcher.operations.copying.image_transfer import direct_copy, relayed_copy
from launcher.operations.reporter import Reporter

# `docker load` unpacks the archive in the engine's data root before it extracts the layers.
SPACE_FACTOR = 2
PROGRESS_EVERY = 10.0  # seconds between progress lines per node


@dataclass(frozen=True, slots=True)
class NodeSync:
    """What sync did on one node."""

    name: str
    action: str  # head, skipped, copied, refused, failed
    detail: str
    bytes: int = 0
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class SyncResult:
    """Every node's outcome, and the head's image."""

    image: str
    image_id: str
    nodes: tuple[NodeSync, ...]

    @property
    def ok(self) -> bool:
        """True when every node now holds the head's image."""
        return all(n.action in ("head", "skipped", "copied") for n in self.nodes)

    def as_dict(self) -> dict[str, Any]:
        """For `sync images --json`."""
        return {
            "ok": self.ok,
            "image": self.image,
            "image_id": self.image_id,
            "nodes": [asdict(n) for n in self.nodes],
        }


def sync_images(cluster: Cluster, reporter: Reporter, relay: bool = False) -> SyncResult:
    """Copy the head's image to every node that lacks it or holds another build; verify.

    Node to node over OpenSSH, or with `relay` through this machine."""
    spec = cluster.spec
    image = str(spec.vllm.image)
    if spec.vllm.runtime != "docker":  # the spec asks for something this command cannot do: exit 2
        raise InputError(
            f"sync images is for the docker runtime; {spec.name} runs vLLM from a venv",
            "set vllm.runtime: docker and vllm.image in the spec",
        )
    if "@" in image:
        raise InputError(
            f"{image} is pinned by digest, and an image copied with docker save/load carries no repo "
            "digest: the nodes could not find it by that name",
            f"pull it on every node (docker pull {image}), or name it by tag in the spec; "
            "`spark-launch check` compares the image ids either way",
        )
    with cluster.locked("sync images"):
        found = cluster.each(lambda agent: agent.image(image))
        head = cluster.head.name
        source = found[head]
        if isinstance(source, SparkLaunchError):
            raise source
        if not source.image_id:
            raise SparkLaunchError(
                f"the head ({head}) does not hold {image}: {source.error or 'no such image'}",
                f"put it there first (docker pull {image}, or docker load), then sync the others from it",
            )
        decided = [_decide(name, found[name], source) for name in cluster.names[1:]]
        targets = [d.name for d in decided if d.action == "copy"]
        for d in decided:
            if d.action != "copy":
                reporter.info(f"{d.name}: {d.action}: {d.detail}")
        copied = _copy(cluster, image, source, targets, reporter, relay) if targets else {}
    head_row = NodeSync(head, "head", f"holds {source.image_id[:19]}")
    rows = [head_row, *(copied.get(d.name, d) for d in decided)]
    return SyncResult(image, source.image_id, tuple(rows))


def _decide(name: str, answer: ImageFacts | SparkLaunchError, source: ImageFacts) -> NodeSync:
    """skipped (same build), copy, refused (short of space) or failed (unreachable, no docker)."""
    if isinstance(answer, SparkLaunchError):
        return NodeSync(name, "failed", answer.message)
    if not answer.docker:
        return NodeSync(name, "failed", answer.error or "no docker on this node")
    if answer.image_id == source.image_id:
        return NodeSync(name, "skipped", "already holds it (same image id)")
    shared = set(answer.repo_digests) & set(source.repo_digests)
    if shared:
        return NodeSync(name, "skipped", f"already holds it (same repo digest {min(shared)})")
    size, free = source.size, answer.free_bytes
    need = SPACE_FACTOR * size
    if free is not None and free < need:
        return NodeSync(
            name,
            "refused",
            f"{_gb(free)} free in {answer.root_dir}, but loading {_gb(size)} needs about "
            f"{_gb(need)} (docker load unpacks the archive there first): free some space "
            "(docker image prune) and sync again",
        )
    held = answer.image_id
    return NodeSync(name, "copy", f"holds another build ({held[:19]})" if held else "lacks it")


def _copy(
    cluster: Cluster, image: str, source: ImageFacts, targets: list[str], reporter: Reporter, relay: bool
) -> dict[str, NodeSync]:
    """Stream the head's image into every target at once; then check what each holds."""
    size = source.size
    began = time.monotonic()
    how = "through this machine" if relay else "node to node"
    reporter.info(f"copying {image} ({_gb(size)}) from {cluster.head.name} to {', '.join(targets)} ({how})")
    progress = _Progress(reporter, size, began)
    sent, why = (relayed_copy if relay else direct_copy)(cluster, image, targets, progress)
    seconds = time.monotonic() - began
    after = fan_out(targets, lambda name: cluster.agents[name].image(image))
    out = {}
    for name in targets:
        got = after[name]
        given = sent.get(name, 0)
        if isinstance(got, ImageFacts) and got.image_id == source.image_id:
            rate = given / seconds / 1e6 if seconds else 0.0
            detail = f"copied {_gb(given)} in {seconds:.0f} s ({rate:.0f} MB/s); image id now matches"
            out[name] = NodeSync(name, "copied", detail, given, seconds)
        else:
            held = got.message if isinstance(got, SparkLaunchError) else got.image_id or "nothing"
            detail = why.get(name) or f"after loading, the node holds {held} under that name"
            out[name] = NodeSync(name, "failed", detail, given, seconds)
        reporter.info(f"{name}: {out[name].action}: {out[name].detail}")
    return out


class _Progress:
    """A line per node every PROGRESS_EVERY seconds: bytes sent, share of the image, rate."""

    def __init__(self, reporter: Reporter, size: int, began: float) -> None:
        self.reporter, self.size, self.began = reporter, size, began
        self.last: dict[str, float] = {}

    def __call__(self, node: str, sent: int) -> None:
        now = time.monotonic()
        if now - self.last.get(node, self.began) < PROGRESS_EVERY:
            return
        self.last[node] = now
        share = f" ({min(99, 100 * sent // self.size)}%)" if self.size else ""
        rate = sent / (now - self.began) / 1e6
        self.reporter.info(f"{node}: {_gb(sent)} of {_gb(self.size)}{share}, {rate:.0f} MB/s")


def _gb(count: int) -> str:
    return f"{count / 1e9:.1f} GB"
