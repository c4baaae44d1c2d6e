"""`spark-launch lock`: write down what every node holds now (SPEC.lock), for `up --locked`."""

from __future__ import annotations

from pathlib import Path

from launcher.core.receipts.lockfile import lock_text
from launcher.node.cluster import Cluster
from launcher.operations.drift import current, lock_path
from launcher.operations.gathering.gather_inputs import gathered

__all__ = ["write_lock"]


def write_lock(cluster: Cluster, spec_path: str) -> tuple[Path, dict[str, dict[str, str]]]:
    """Gather every node's inputs and write SPEC.lock; its path and entries."""
    nodes = current(cluster, gathered(cluster))
    path = lock_path(spec_path)
    path.write_text(lock_text(nodes, cluster.spec.name))
    return path, nodes
