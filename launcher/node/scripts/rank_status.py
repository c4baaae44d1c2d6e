"""Report what runs on this node: state, liveness, exit status, and the log from an offset.

The poll `up` runs every second while it waits: keep it small.
"""

from __future__ import annotations

import sys

from .common import (
    container_processes,
    container_state,
    emit,
    our_processes,
    read_json,
    read_text,
    run_directory,
    save_container_log,
    state_path,
)

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any


def container_status(state: dict[str, Any], offset: int | None) -> dict[str, Any]:
    """status for a container: docker's view, and its log copied next to the others."""
    info = container_state(state["container"])
    result: dict[str, Any] = {
        "ok": True,
        "state": {**state, "pid": info["pid"]},
        "alive": info["running"],
        "processes": container_processes(info["id"]) if info["running"] else 0,
        "exit_code": info["exit_code"],
    }
    if offset is not None:
        if info["exists"]:  # once removed, the copy `stop` saved is the log
            save_container_log(state["container"], state["log"])
        result.update(read_log(state["log"], offset))
    return result


def status(directory: str, offset: int | None = None) -> None:
    """What runs here: state, liveness, exit status, and the log from `offset` on."""
    emit(**report(directory, offset))


def report(directory: str, offset: int | None = None) -> dict[str, Any]:
    """The status answer (also part of the lock's answer to `up`: `cluster_lock hold`)."""
    state = read_json(state_path(directory))
    if state and state.get("container"):
        return container_status(state, offset)
    procs = our_processes(directory)
    result: dict[str, Any] = {"ok": True, "state": state, "alive": bool(procs), "processes": len(procs)}
    if state:
        code = (read_text(state.get("exit_file")) or "").strip()
        result["exit_code"] = int(code) if code.lstrip("-").isdigit() else None
        if offset is not None:
            result.update(read_log(state["log"], offset))
    return result


def read_log(path: str, offset: int, limit: int = 262144) -> dict[str, Any]:
    """Up to `limit` bytes of the log from `offset`, and where the next read starts."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(limit)
    except OSError:
        return {"log_size": 0, "log": ""}
    return {"log_size": offset + len(data), "log": data.decode("utf-8", "replace")}


def main(argv: list[str]) -> None:
    """status DIR [OFFSET]"""
    status(run_directory(argv), int(argv[1]) if len(argv) > 1 else None)


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
