"""Make a model directory on this node ready to receive a copy.

Creates the directory, then removes the files the job names: those whose content differs
from the source's while not shorter (a copy cannot continue them) and those the source
does not have. Directories left empty by that go too. Paths stay inside the model directory.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from launcher.node.scripts.common import emit, take_json  # inlined when sent


def inside(root: str, rel: str) -> str | None:
    """root/rel when rel is a plain relative path that stays under root, else None."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    return os.path.join(root, *parts)


def prepare(job: dict[str, Any]) -> None:
    """mkdir -p the model directory; remove the job's files; report what failed."""
    root = job["path"]
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as exc:
        return emit(ok=False, error=f"cannot create {root}: {exc.strerror}")
    errors, removed, parents = [], 0, set()
    for rel in job["remove"]:
        path = inside(root, rel)
        if path is None:
            errors.append(f"{rel}: not a path inside {root}")
            continue
        try:
            os.remove(path)
            removed += 1
            parents.add(os.path.dirname(path))
        except FileNotFoundError:
            pass
        except OSError as exc:
            errors.append(f"{rel}: {exc.strerror}")
    for parent in sorted(parents, key=len, reverse=True):
        remove_empty(root, parent)
    return emit(ok=not errors, removed=removed, errors=errors[:20])


def remove_empty(root: str, directory: str) -> None:
    """Remove `directory` and its parents below root while they are empty."""
    while directory != root and directory.startswith(root + "/"):
        try:
            os.rmdir(directory)  # only if empty
        except OSError:
            return
        directory = os.path.dirname(directory)


def main(argv: list[str]) -> None:
    """prepare DIR JOB_FILE: {"path": model directory, "remove": [relative paths]}"""
    job = take_json(argv[1])
    if job is None:
        emit(ok=False, error=f"no readable job file {argv[1]}")
    else:
        prepare(job)


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
