"""The cluster's lock: a directory beside the node directories, naming its holder.

Every change happens under an exclusive flock of `lock.mutex` beside it, so that taking,
breaking and releasing are each one atomic step: a stale lock is broken only by naming the
holder found stale (its token), and only while that holder still has it; two launchers
that both find the same stale lock cannot both take it.

`up` asks more of the two calls that hold and release the lock, so that starting a cluster
costs the head no call of its own for them: `hold` takes the lock and, once taken, says what
runs on this node (the status script's answer); a release may keep a file under the home
first (the run's receipt, its text on stdin), so that the next holder finds it there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys

from .common import emit, keep_file, read_json, run_directory, write_json
from .rank_status import report

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


def lock_dir(directory: str) -> str:
    """The cluster's lock: a directory beside the node directories."""
    return os.path.join(os.path.dirname(directory.rstrip("/")), "lock")


@contextlib.contextmanager
def mutex(path: str) -> Iterator[None]:
    """Hold the exclusive flock that serializes every change of the lock."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path + ".mutex", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def holder_of(path: str) -> dict[str, Any]:
    """Who holds the lock ({} when its holder file is unreadable)."""
    found = read_json(os.path.join(path, "holder.json"), {})
    return found if isinstance(found, dict) else {}


def take(directory: str, holder: dict[str, Any], stale: str | None, status: bool = False) -> None:
    """Take the lock; with `stale`, break it if (and only if) that token still holds it. With
    `status`, the answer also says what runs on this node once the lock is taken."""
    taken = seize(lock_dir(directory), holder, stale)
    if taken.get("ok") and status:
        taken["status"] = report(directory)
    emit(**taken)


def seize(path: str, holder: dict[str, Any], stale: str | None) -> dict[str, Any]:
    """Take the lock at `path` in one atomic step: the answer."""
    with mutex(path):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            current = holder_of(path)
            if stale is None or current.get("token") != stale:
                return {"ok": False, "holder": current}
            write_json(os.path.join(path, "holder.json"), holder)
            return {"ok": True, "broke": current}
        write_json(os.path.join(path, "holder.json"), holder)
    return {"ok": True}


def release(directory: str, token: str, keep: str | None = None) -> None:
    """Release the lock if `token` holds it ('*' forces it); with `keep`, first keep stdin's
    text at ~/keep (best effort: a file that cannot be kept never keeps the lock held)."""
    if keep is not None:
        kept = keep_file(keep, sys.stdin.read())
        if kept is not None:
            sys.stderr.write(f"spark-launch: {kept}\n")
    path = lock_dir(directory)
    with mutex(path):
        current = holder_of(path)
        if token != "*" and current.get("token") != token:
            return emit(ok=False, holder=current)
        import shutil  # here: only a release removes a tree, and shutil costs every call's start

        shutil.rmtree(path, ignore_errors=True)
    return emit(ok=True)


def main(argv: list[str]) -> None:
    """lock DIR take|hold HOLDER_JSON [STALE_TOKEN] | lock DIR release TOKEN [KEEP]"""
    directory = run_directory(argv)
    extra = argv[3] if len(argv) > 3 else None
    if argv[1] in ("take", "hold"):
        take(directory, json.loads(argv[2]), extra, status=argv[1] == "hold")
    else:
        release(directory, argv[2], extra)


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
