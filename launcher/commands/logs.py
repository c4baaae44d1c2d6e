"""`spark-launch logs`: every node's log of the current run, each line prefixed by its node."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from launcher.node.cluster import Cluster

if TYPE_CHECKING:
    from launcher.commands.fleet import Deployments


def logs(cluster: Cluster, names: list[str], lines: int, follow: bool, emit: Callable[[str], None]) -> None:
    """Each node's log prefixed by its name; following interleaves them as they come."""
    width = max(len(n) for n in names)
    lock = threading.Lock()

    def printer(name: str) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            with lock:
                emit(f"{name:>{width}} | {line}")

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
    deployments: Deployments,
    nodes: set[str],
    lines: int,
    follow: bool,
    emit: Callable[[str], None],
    endpoint: bool = False,
) -> None:
    """Every chosen deployment's logs (or the endpoint's), lines prefixed by deployment/node."""
    if endpoint and deployments.endpoint is not None:
        name = deployments.endpoint.plan.node.name
        deployments.endpoint.agent.logs(lines, follow, lambda line: emit(f"endpoint/{name} | {line}"))
        return
    jobs = []
    for dep, cluster in deployments.clusters.items():
        names = [n for n in cluster.names if not nodes or n in nodes]
        say = emit if not deployments.fleet.multi else (lambda line, dep=dep: emit(f"{dep}/{line}"))
        if names:
            jobs.append(threading.Thread(target=logs, args=(cluster, names, lines, follow, say), daemon=True))
    for job in jobs:
        job.start()
        if not follow:
            job.join()
    while any(j.is_alive() for j in jobs):
        time.sleep(0.2)
