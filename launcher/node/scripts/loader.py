"""The loader: what runs a node script on the node, sent as the first line of its stdin.

The command line (`core.remote.SCRIPT_STAGE`) runs this line; it reads the script's source,
the rest of stdin, at once (`python3 -` reads its program a byte at a time: tens of
milliseconds of system calls for a bundle), and keeps it under ~/.spark-launch/cache/scripts,
named by the script and the sha256 of the source, so that the node's own Python compiles it
once and keeps its bytecode beside it (`__pycache__`, checked against that file as for any
module). What is kept there is only ever used when it is exactly what was sent; where it
cannot be written, the source runs as it came. When a script is kept anew (another launcher
version), the other versions of that script kept over a week ago are removed, bytecode and all
(one still in use is kept again at its next call: one compile more).
"""

from __future__ import annotations

import sys
from types import CodeType

KEPT = "~/.spark-launch/cache/scripts"
STALE_SECONDS = 7 * 24 * 3600  # a version kept this long ago goes when another one is kept


def kept(name: str, source: bytes) -> str:
    """The path of `source` kept under KEPT, written there now unless it holds exactly that."""
    import hashlib
    import os

    folder = os.path.expanduser(KEPT)
    path = os.path.join(folder, f"{name}-{hashlib.sha256(source).hexdigest()[:32]}.py")
    try:
        with open(path, "rb") as f:
            if f.read() == source:
                return path
    except OSError:
        pass
    os.makedirs(folder, mode=0o700, exist_ok=True)
    prune(folder, name)
    # This writer's own (created exclusively, mode 0600): nodes sharing a home may write the
    # same file at the same moment, and a reader sees the whole file or none.
    tmp = f"{path}.{os.uname().nodename}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(source)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):  # not put in place: the write failed
            os.unlink(tmp)
    return path


def prune(folder: str, name: str) -> None:
    """Remove the versions of script `name` (and their bytecode) kept over a week ago."""
    import glob
    import os
    import time

    for old in glob.glob(os.path.join(glob.escape(folder), f"{name}-*.py")):
        stem = os.path.basename(old)[:-3]
        if len(stem) != len(name) + 33:  # NAME-<32 hex digits>: not another script's (NAME-x-...)
            continue
        try:
            if time.time() - os.stat(old).st_mtime > STALE_SECONDS:
                for pyc in glob.glob(os.path.join(glob.escape(folder), "__pycache__", f"{stem}.*.pyc")):
                    os.unlink(pyc)
                os.unlink(old)
        except OSError:  # removed meanwhile by another call, or not ours to remove
            continue


def compiled(name: str, source: bytes) -> CodeType:
    """The script's code: from the kept file's bytecode where it can be kept, else compiled now."""
    from importlib.machinery import SourceFileLoader

    try:
        code = SourceFileLoader("__main__", kept(name, source)).get_code("__main__")
    except OSError:
        code = None
    return code if code is not None else compile(source, f"<{name}>", "exec", dont_inherit=True)


if __name__ == "__main__":  # python3 -S -c STAGE NAME DIR ARGS...: the script runs as __main__
    exec(compiled(sys.argv[1], sys.stdin.buffer.read()), globals())
