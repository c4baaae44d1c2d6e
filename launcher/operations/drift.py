"""The lock file (SPEC.lock, written by `spark-launch lock`) held against what the nodes hold now:
a start that differs is refused (`up --locked`).

Not the cluster's lock (`Cluster.locked`, which keeps two commands from acting at once): this
is a file beside the spec, reviewed in git, naming per node the vLLM build or image, the
model's files by sha256 and the host facts that must not move. `up --locked` compares the
nodes with it before anything starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from launcher.core.answers.facts_answer import Facts
from launcher.core.receipts.content import node_inputs
from launcher.core.receipts.lockfile import (
    Lock,
    LockError,
    drift,
    drift_summary,
    entries,
    parse_lock,
)
from launcher.errors import ExitStatus, SparkLaunchError
from launcher.node.cluster import Cluster

__all__ = ["LockDrift", "lock_path", "read_lock", "refuse_drift"]


class LockDrift(SparkLaunchError):
    """A node differs from the lock file: nothing was started."""

    exit_status = ExitStatus.NODES_DISAGREE


def lock_path(spec_path: str) -> Path:
    """The lock file of a spec: SPEC.lock beside it."""
    return Path(f"{spec_path}.lock")


def read_lock(spec_path: str) -> Lock:
    """The spec's lock file; an error saying how to write one when there is none."""
    path = lock_path(spec_path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise LockError(
            f"cannot read the lock file {path}: {exc.strerror}",
            f"`spark-launch lock {spec_path}` writes it from what the nodes hold now",
        ) from None
    return parse_lock(text, str(path))


def current(cluster: Cluster, facts: Mapping[str, Facts]) -> dict[str, dict[str, str]]:
    """What each node holds now, as lock entries (nodes in rank order)."""
    return {n.name: entries(node_inputs(cluster.spec, n, facts[n.name])) for n in cluster.plan.nodes}


def refuse_drift(cluster: Cluster, lock: Lock, facts: Mapping[str, Facts]) -> None:
    """LockDrift naming every input that moved (the model's file, the build, the kernel), if any."""
    found = drift(lock.nodes, current(cluster, facts))
    if not found:
        return
    lines = "\n".join(f"  {line}" for line in drift_summary(found))
    raise LockDrift(
        f"the nodes differ from {lock.source}: nothing was started\n{lines}",
        "restore what moved, or, if the change is intended, `spark-launch lock SPEC` and review the "
        "lock file's diff before committing it",
    )
