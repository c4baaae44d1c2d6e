"""Keep the unit on this node, as ~/.spark-launch/agent/<sha256>.pyz: where every call's stub looks.

Run carried (`core.stubs.CARRY_STUB`): the unit came on stdin, was hashed against the sha256
its command line names, and runs from a private temporary file; this puts a copy in place.
Each folder on the way is checked to be this user's own (a directory, not a link, that no one
else may write: created 0700); the copy is written to a new file of an unguessable name,
created exclusively (mode 0600, never through a link), synced to disk, moved into place in
one step (a reader sees the whole unit or none), and hashed again there. Units of other
versions kept over a week ago are removed, and temporary files left by a crash (a launcher
that still uses a removed unit sends it again at its next call). Run from the kept unit, it
only says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time

from .common import emit, private_dir, unit_file

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

HOME = (".spark-launch", "agent")  # core.stubs.UNIT_HOME
STALE_SECONDS = 7 * 24 * 3600  # another version kept this long ago goes when a new one is kept
LEFT_SECONDS = 3600  # a temporary file this old was left by a writer that died
HEX = set("0123456789abcdef")


def sha_of(path: str) -> str | None:
    """The sha256 of a file's content, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def folder() -> str | None:
    """~/.spark-launch/agent, each folder on the way made this user's own if missing; None when
    one of them is not (a link, another's, writable by others)."""
    path = os.path.expanduser("~")
    for part in HOME:
        path = os.path.join(path, part)
        if not private_dir(path):
            return None
    return path


def write(path: str, data: bytes) -> None:
    """`data` as the new file `path`, in place only once it is whole and on disk: through a
    temporary file of an unguessable name beside it, created exclusively, never through a link."""
    tmp = os.path.join(os.path.dirname(path), f".{os.urandom(16).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):  # not moved into place: the write failed
            os.unlink(tmp)


def prune(where: str, keep: str) -> list[str]:
    """Remove the other units kept over a week ago, and temporary files left by dead writers;
    the units removed, by name."""
    removed = []
    now = time.time()
    for name in sorted(os.listdir(where)):
        unit = len(name) == 68 and name.endswith(".pyz") and set(name[:64]) <= HEX
        left = name.startswith(".") and name.endswith(".tmp")
        try:
            age = now - os.lstat(os.path.join(where, name)).st_mtime
            if (unit and name != keep and age > STALE_SECONDS) or (left and age > LEFT_SECONDS):
                os.unlink(os.path.join(where, name))
                removed += [name] if unit else []
        except OSError:  # removed meanwhile by another call
            continue
    return removed


def install(source: str) -> dict[str, Any]:
    """Keep the unit `source` under its sha256; the answer says so, or why it cannot be kept."""
    with open(source, "rb") as f:
        data = f.read()
    sha = hashlib.sha256(data).hexdigest()
    where = folder()
    if where is None:
        return {"ok": False, "error": "~/.spark-launch/agent is not a folder of this user's only"}
    path = os.path.join(where, f"{sha}.pyz")
    if source == path or sha_of(path) == sha:  # run from it, or another call kept it meanwhile
        return {"ok": True, "unit": sha, "removed": []}
    try:
        write(path, data)
    except OSError as exc:
        return {"ok": False, "error": f"cannot write {path}: {exc.strerror or exc}"}
    if sha_of(path) != sha:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return {"ok": False, "error": f"{path} changed as it was kept: removed"}
    return {"ok": True, "unit": sha, "removed": prune(where, f"{sha}.pyz")}


def main(argv: list[str]) -> None:
    """install: keep the unit this runs from."""
    emit(**install(unit_file()))


if __name__ == "__main__":  # python3 -S -c STUB UNIT install
    main(sys.argv[2:])
