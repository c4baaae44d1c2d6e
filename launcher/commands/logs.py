"""`spark-launch logs`: every node's log of the current run, each line prefixed by its node."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from launcher.node.cluster import Reached

if TYPE_CHECKING:
    from launcher.operations.fleet import Reachable


def logs(
    cluster: Reached, names: list[str], lines: int, follow: bool, emit: Callable[[str, str], None]
) -> None:
    """Each node's log line by line, handed to `emit(node, line)`; following interleaves them as
    they come."""
    lock = threading.Lock()

    def printer(name: str) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            with lock:
                emit(name, line)

        return on_line

    if not follow:
        for name in names:
            cluster.agents[name].logs(lines, False, printer(name))
        return
    threads = [
        threading.Thread(target=cluster.agents[n].logs, args=(lines, True, printer(n)), daemon=True)
        for n in names
    ]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(0.2)


def fleet_logs(
    deployments: Reachable,
    names: dict[str, list[str]],
    lines: int,
    follow: bool,
    emit: Callable[[str, str], None],
) -> None:
    """The logs of each chosen deployment's nodes in `names`, handed to `emit(label, line)`:
    the node's name, or deployment/node with several deployments."""
    jobs = []
    for dep, cluster in deployments.clusters.items():
        multi = deployments.multi

        def say(node: str, line: str, dep: str = dep, multi: bool = multi) -> None:
            emit(f"{dep}/{node}" if multi else node, line)

        if names.get(dep):
            jobs.append(
                threading.Thread(target=logs, args=(cluster, names[dep], lines, follow, say), daemon=True)
            )
    for job in jobs:
        job.start()
        if not follow:
            job.join()
    while any(j.is_alive() for j in jobs):
        time.sleep(0.2)


def endpoint_logs(deployments: Reachable, lines: int, follow: bool, emit: Callable[[str, str], None]) -> None:
    """The endpoint's log, handed to `emit("endpoint/<node>", line)`."""
    assert deployments.endpoint is not None
    label = f"endpoint/{deployments.endpoint.plan.node.name}"
    deployments.endpoint.agent.logs(lines, follow, lambda line: emit(label, line))
