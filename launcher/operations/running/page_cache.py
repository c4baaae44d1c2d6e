"""Dropping the page cache on every node (`up --drop-caches`, `supervise --drop-caches`).

On unified memory the cache left by the last load counts against the GPU at the next
start. Each node runs `sync`, then writes drop_caches: as root, or through `sudo -n`.
"""

from __future__ import annotations

from launcher.core import remote
from launcher.core.answers.run_answer import Dropped
from launcher.core.checks.budget import gib
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.operations.reporter import Reporter

SUDOERS = "{user} ALL=(root) NOPASSWD: /usr/bin/tee /proc/sys/vm/drop_caches"


class CachesNotDropped(SparkLaunchError):
    """A node would not drop its page cache (not root, and sudo -n is not allowed)."""


def drop_caches(cluster: Cluster, reporter: Reporter) -> dict[str, Dropped]:
    """sync and drop the page cache on every node at once; CachesNotDropped when one cannot."""
    reporter.info("dropping the page cache on every node (sync, then drop_caches)")
    answers = cluster.each(lambda agent: agent.ask(remote.drop_caches_call(agent.dir), Dropped.parse))
    done: dict[str, Dropped] = {}
    for name, answer in answers.items():
        if isinstance(answer, SparkLaunchError):
            raise answer
        done[name] = answer
    refused = {n: a for n, a in done.items() if a.error is not None}
    if refused:
        name, why = next(iter(refused.items()))
        raise CachesNotDropped(
            f"cannot drop the page cache on {', '.join(refused)}: {why.error}",
            f"run spark-launch's SSH as root on the nodes, or allow it in sudoers on each node: "
            f"`{SUDOERS.format(user=why.user or 'USER')}` (visudo -f /etc/sudoers.d/spark-launch)",
        )
    for name, answer in done.items():
        reporter.info(
            f"{name}: page cache dropped: {gib(answer.free_before)} -> {gib(answer.free_after)} GiB free"
        )
    return done
