"""Stop every process of ours on this node: SIGTERM, SIGKILL after a grace period, verify.

Only our processes are signalled (the run's session, and whatever carries our marker:
`common.our_processes`), so a process that is not ours is never touched, and our workers
are still found after their leader died, after they dropped the marker from their
environment (vLLM's do) or left the process group. The answer says how many are left: none,
or the stop failed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from .common import (
    LABEL,
    container_state,
    docker,
    emit,
    our_processes,
    owner_of,
    read_json,
    run_directory,
    save_container_log,
    state_path,
    write_json,
)

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any


def signal_all(procs: dict[int, int], sig: int) -> None:
    """Signal every process group of ours, and each process directly (a member may have left its group)."""
    for group in set(procs.values()):
        with contextlib.suppress(OSError):
            os.killpg(group, sig)
    for pid in procs:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def wait_gone(directory: str, seconds: float) -> dict[int, int]:
    """Wait until none of ours is left, or `seconds` pass; what is left."""
    deadline = time.time() + seconds
    left = our_processes(directory)
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = our_processes(directory)
    return left


def stop(directory: str, grace: float, containers: bool = False) -> None:
    """SIGTERM every process of ours, SIGKILL what is left after `grace` s, verify none remain."""
    state = read_json(state_path(directory))
    if containers or (state and state.get("container")):
        return stop_containers(directory, state, grace)
    procs = our_processes(directory)
    signal_all(procs, signal.SIGTERM)
    signal_all(procs, signal.SIGCONT)  # a frozen (stopped) process acts on SIGTERM only once continued
    left = wait_gone(directory, grace)
    signal_all(left, signal.SIGKILL)
    remaining = wait_gone(directory, 5)
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


def labelled(cluster: str) -> dict[str, bool]:
    """{container id: running} of every container carrying the cluster's label, running or not."""
    done = docker(
        "ps", "--all", "--no-trunc", "--filter", f"label={LABEL}={cluster}", "--format", "{{.ID}} {{.State}}"
    )
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or f"docker ps failed ({done.returncode})")
    return {
        line.split()[0]: line.split()[1] == "running" for line in done.stdout.splitlines() if line.strip()
    }


def stop_containers(directory: str, state: dict[str, Any] | None, grace: float) -> None:
    """docker stop (SIGTERM, then SIGKILL after `grace`) and remove every container with our label."""
    cluster = owner_of(directory)
    try:
        found = labelled(cluster)
    except OSError as exc:
        return emit(
            ok=False,
            containers=True,
            error=f"cannot list the containers: {exc}",
            found=0,
            removed=0,
            remaining=1,
        )
    running = [cid for cid, up in found.items() if up]
    if running:
        docker("stop", "--time", str(int(grace)), *running)
    if state and state.get("container") and container_state(state["container"])["exists"]:
        save_container_log(state["container"], state["log"])  # the log dies with the container
        if running:
            state["stopped_at"] = time.time()
        write_json(state_path(directory), state)
    if found:
        docker("rm", "--force", *found)
    left = labelled(cluster)
    return emit(
        ok=not left,
        containers=True,
        found=len(running),
        groups=len(running),
        killed=0,
        removed=len(found),
        remaining=len(left),
    )


def main(argv: list[str]) -> None:
    """stop DIR [GRACE] [containers]"""
    grace = float(argv[1]) if len(argv) > 1 else 10.0
    stop(run_directory(argv), grace, argv[2:3] == ["containers"])


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
