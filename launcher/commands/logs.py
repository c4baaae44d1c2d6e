"""`spark-launch logs`: every node's log of the current run, each line prefixed by its node."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from launcher.node.cluster import Cluster


def logs(
    cluster: Cluster, names: list[str], lines: int, follow: bool, emit: Callable[[str, str], None]
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
