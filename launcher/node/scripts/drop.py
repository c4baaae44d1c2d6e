"""Drop this node's page cache: `sync`, then 3 into /proc/sys/vm/drop_caches.

On unified memory (a DGX Spark) the page cache left by the last load counts against the
GPU: CUDA's start-up check does not see it as free. Only root may write drop_caches; any
other user goes through `sudo -n tee /proc/sys/vm/drop_caches` (never a password prompt),
a command narrow enough for a sudoers rule. Reports MemFree before and after.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys

from .common import emit, which
from .memory import parse_meminfo

DROP_CACHES = "/proc/sys/vm/drop_caches"


def meminfo() -> dict[str, int]:
    """/proc/meminfo's figures, in bytes."""
    with open("/proc/meminfo") as f:
        return parse_meminfo(f.read())


def write_drop_caches() -> str | None:
    """Write 3 to drop_caches, as root or through `sudo -n`; why not, when it could not."""
    if os.geteuid() == 0:
        try:
            with open(DROP_CACHES, "w") as f:
                f.write("3\n")
        except OSError as exc:
            return f"cannot write {DROP_CACHES} as root: {exc.strerror or exc}"
        return None
    if which("sudo") is None:
        return f"not root, and sudo is not installed to write {DROP_CACHES}"
    done = subprocess.run(
        ["sudo", "-n", "tee", DROP_CACHES], input="3\n", capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return f"not permitted: `sudo -n tee {DROP_CACHES}` said: {said[0]}"
    return None


def drop() -> None:
    """sync, drop the page cache, and report what that freed."""
    before = meminfo()
    os.sync()
    why = write_drop_caches()
    if why:
        return emit(ok=False, error=why, user=pwd.getpwuid(os.geteuid()).pw_name)
    after = meminfo()
    return emit(
        ok=True,
        free_before=before.get("MemFree", 0),
        free_after=after.get("MemFree", 0),
        available=after.get("MemAvailable", 0),
    )


def main(argv: list[str]) -> None:
    """drop DIR"""
    drop()


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
