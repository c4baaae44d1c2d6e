"""Make a model directory on this node ready to receive a copy.

Creates the directory, then removes the files the job names: those whose content differs
from the source's while not shorter (a copy cannot continue them) and those the source
does not have. Directories left empty by that go too. Paths stay inside the model directory:
each is reached one real directory at a time from the model's, so a link (planted there, or
swapped in meanwhile) is removed itself and never followed.
"""

from __future__ import annotations

import errno
import os
import sys

from .common import emit, take_json

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any


def parts_inside(rel: str) -> list[str] | None:
    """rel's parts when it is a plain relative path (no '', '.', '..'), else None."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    return parts


def open_parent(root_fd: int, parts: list[str]) -> int:
    """A descriptor of the directory holding parts[-1], reached from root one real directory at
    a time: a link on the way is never followed (ELOOP/ENOTDIR instead)."""
    fd = os.dup(root_fd)
    for part in parts[:-1]:
        try:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)
        fd = nxt
    return fd


def remove_inside(root_fd: int, parts: list[str]) -> bool:
    """Remove root/parts (a file, a link itself, a FIFO: never what a link points to, never a
    directory); True when something was removed. The emptied parents go too."""
    fd = open_parent(root_fd, parts)
    try:
        os.unlink(parts[-1], dir_fd=fd)  # unlink removes a link, not its target
    finally:
        os.close(fd)
    for depth in range(len(parts) - 1, 0, -1):  # the parents it emptied, deepest first
        fd = open_parent(root_fd, parts[:depth])
        try:
            os.rmdir(parts[depth - 1], dir_fd=fd)  # only if empty
        except OSError:
            return True
        finally:
            os.close(fd)
    return True


def prepare(job: dict[str, Any]) -> None:
    """mkdir -p the model directory; remove the job's files; report what failed."""
    root = job["path"]
    try:
        os.makedirs(root, exist_ok=True)
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return emit(ok=False, error=f"cannot create {root}: {exc.strerror}")
    errors, removed = [], 0
    for rel in job["remove"]:
        parts = parts_inside(rel)
        if parts is None:
            errors.append(f"{rel}: not a path inside {root}")
            continue
        try:
            removed += remove_inside(root_fd, parts)
        except FileNotFoundError:
            pass
        except OSError as exc:
            link = exc.errno in (errno.ELOOP, errno.ENOTDIR)
            errors.append(f"{rel}: {'a link on the way: not followed' if link else exc.strerror}")
    os.close(root_fd)
    return emit(ok=not errors, removed=removed, errors=errors[:20])


def main(argv: list[str]) -> None:
    """prepare DIR JOB_FILE: {"path": model directory, "remove": [relative paths]}"""
    job = take_json(argv[1])
    if job is None:
        emit(ok=False, error=f"no readable job file {argv[1]}")
    else:
        prepare(job)


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
