"""The cluster's lock: a directory beside the node directories (mkdir is atomic)."""

from __future__ import annotations

import contextlib
import json
import os
import sys

from launcher.node.scripts.common import emit, read_json, run_directory, write_json  # inlined when sent


def lock_dir(directory: str) -> str:
    """The cluster's lock: a directory beside the node directories (mkdir is atomic)."""
    return os.path.join(os.path.dirname(directory.rstrip("/")), "lock")


def lock(directory: str, holder: str) -> None:
    """Take the cluster's lock, or report who holds it."""
    path = lock_dir(directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        return emit(ok=False, holder=read_json(os.path.join(path, "holder.json"), {}))
    write_json(os.path.join(path, "holder.json"), json.loads(holder))
    return emit(ok=True)


def unlock(directory: str, token: str) -> None:
    """Release the lock if `token` holds it ('*' forces it)."""
    path = lock_dir(directory)
    holder = read_json(os.path.join(path, "holder.json"), {})
    if token != "*" and holder.get("token") != token:
        return emit(ok=False, holder=holder)
    for name in ("holder.json", "holder.json.tmp"):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(path, name))
    with contextlib.suppress(OSError):
        os.rmdir(path)
    return emit(ok=True)


def main(argv: list[str]) -> None:
    """lock DIR take HOLDER_JSON | lock DIR release TOKEN"""
    directory = run_directory(argv)
    if argv[1] == "take":
        lock(directory, argv[2])
    else:
        unlock(directory, argv[2])


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
