"""Hand the current run's log to tail(1) (or `docker logs`), optionally following it."""

from __future__ import annotations

import os
import sys

from launcher.node.scripts.common import (  # inlined when sent
    container_state,
    read_json,
    run_directory,
    state_path,
)


def logs(directory: str, lines: int, follow: bool) -> None:
    """Hand over to tail(1) on the current run's log (or `docker logs`, stderr merged, while it exists)."""
    state = read_json(state_path(directory))
    container = state and state.get("container")
    if container and container_state(container)["exists"]:
        sys.stdout.flush()
        os.dup2(1, 2)  # the container's stderr (tracebacks) goes with its stdout, in order
        tail = ["--tail", str(lines), *(["--follow"] if follow else [])]
        os.execvp("docker", ["docker", "logs", *tail, container])
    if not state or not os.path.exists(state["log"]):
        sys.stdout.write("(no log on this node yet)\n")
        return
    sys.stdout.flush()
    os.execvp("tail", ["tail", "-n", str(lines), *(["-F"] if follow else []), state["log"]])


def main(argv: list[str]) -> None:
    """logs DIR LINES [follow]"""
    logs(run_directory(argv), int(argv[1]), argv[2:3] == ["follow"])


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
