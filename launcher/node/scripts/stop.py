"""Stop every process of ours on this node: SIGTERM, SIGKILL after a grace period, verify.

Only process groups carrying our marker are signalled, so a process that is not ours is
never touched, and our workers are still found after their leader died.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import Any

from launcher.node.scripts.common import (  # inlined when sent
    container_state,
    docker,
    emit,
    node_prefix,
    our_processes,
    read_json,
    run_directory,
    state_path,
    write_json,
)


def signal_all(procs: dict[int, int], sig: int) -> None:
    """Signal every process group of ours, and each process directly (a member may have left its group)."""
    for group in set(procs.values()):
        with contextlib.suppress(OSError):
            os.killpg(group, sig)
    for pid in procs:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def wait_gone(prefix: str, seconds: float) -> dict[int, int]:
    """Wait until none of ours is left, or `seconds` pass; what is left."""
    deadline = time.time() + seconds
    left = our_processes(prefix)
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = our_processes(prefix)
    return left


def stop(directory: str, grace: float) -> None:
    """SIGTERM every process of ours, SIGKILL what is left after `grace` s, verify none remain."""
    state = read_json(state_path(directory))
    if state and state.get("container"):
        return stop_container(directory, state, grace)
    prefix = node_prefix(directory)
    procs = our_processes(prefix)
    signal_all(procs, signal.SIGTERM)
    signal_all(procs, signal.SIGCONT)  # a frozen (stopped) process acts on SIGTERM only once continued
    left = wait_gone(prefix, grace)
    signal_all(left, signal.SIGKILL)
    remaining = wait_gone(prefix, 5)
    if state and procs:
        state["stopped_at"] = time.time()
        write_json(state_path(directory), state)
    return emit(
        ok=not remaining,
        found=len(procs),
        groups=len(set(procs.values())),
        killed=len(left),
        remaining=len(remaining),
    )


def stop_container(directory: str, state: dict[str, Any], grace: float) -> None:
    """docker stop (SIGTERM, then SIGKILL after `grace`), then remove the container."""
    name = state["container"]
    found = container_state(name)
    if found["running"]:
        docker("stop", "--time", str(int(grace)), name)
        state["stopped_at"] = time.time()
        write_json(state_path(directory), state)
    if found["exists"]:
        docker("rm", "--force", name)
    left = container_state(name)["exists"]
    return emit(
        ok=not left, found=int(found["running"]), groups=int(found["running"]), killed=0, remaining=int(left)
    )


def main(argv: list[str]) -> None:
    """stop DIR [GRACE]"""
    stop(run_directory(argv), float(argv[1]) if len(argv) > 1 else 10.0)


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
