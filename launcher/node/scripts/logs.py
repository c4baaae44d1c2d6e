"""Hand the current run's log to tail(1) (or `docker logs`), optionally following it."""

from __future__ import annotations

import os
import sys

from launcher.node.scripts.common import read_json, run_directory, state_path  # inlined when sent


def logs(directory: str, lines: int, follow: bool) -> None:
    """Hand over to tail(1) on the current run's log."""
    state = read_json(state_path(directory))
    if not state or not (state.get("container") or os.path.exists(state["log"])):
        sys.stdout.write("(no log on this node yet)\n")
        return
    sys.stdout.flush()
    if state.get("container"):
        os.execvp(
            "docker",
            ["docker", "logs", "--tail", str(lines), *(["--follow"] if follow else []), state["container"]],
        )
    os.execvp("tail", ["tail", "-n", str(lines), *(["-F"] if follow else []), state["log"]])


def main(argv: list[str]) -> None:
    """logs DIR LINES [follow]"""
    logs(run_directory(argv), int(argv[1]), argv[2:3] == ["follow"])


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
