"""The remote shell a node runs to reach another node (rsync's for `sync models`, the image
stream's for `sync images`): $RSYNC_RSH when this node's environment sets it, else the job's
default (ssh in batch mode).

A bulk copy over SSH runs at its cipher's speed, not the link's: OpenSSH lists
chacha20-poly1305 first, and AES-GCM, which the CPU does in hardware (AES-NI on x86, the
crypto extensions of Arm cores such as a DGX Spark's), moves the same bytes 1.4 to 3 times
faster. So when the remote shell is OpenSSH and nothing in its configuration chose the
ciphers (its effective list for the host is the built-in one), the AES-GCM ones are moved to
the front of that same list: no cipher is added, and a host that refuses them still
negotiates the next. A remote shell that is not ssh, one that names its ciphers, or a
configuration (the user's or the system's) that sets Ciphers is used as it is.
"""

from __future__ import annotations

import os
import shlex
import subprocess

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

FAST = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def remote_shell(job: dict[str, Any]) -> list[str]:
    """The remote shell's words as configured: $RSYNC_RSH here if set, else the job's default."""
    return shlex.split(os.environ.get("RSYNC_RSH") or str(job["default_rsh"]))


def _ciphers(words: list[str], host: str) -> list[str] | None:
    """The ciphers `words host` would offer, as `ssh -G` reports them; None if it cannot say."""
    try:
        done = subprocess.run(
            [words[0], "-G", *words[1:], host],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        key, _, value = line.partition(" ")
        if key == "ciphers":
            return value.strip().split(",")
    return None


def fast_shell(words: list[str], host: str) -> list[str]:
    """`words` with AES-GCM first among its ciphers for `host`, when nothing chose them (see above)."""
    if not words or os.path.basename(words[0]) != "ssh":
        return words
    if any(w == "-c" or w.startswith("-c") or "ciphers" in w.lower() for w in words[1:]):
        return words  # the remote shell names its ciphers itself
    chosen = _ciphers(words, host)
    built_in = _ciphers([words[0], "-F", "/dev/null"], host)
    if chosen is None or chosen != built_in or not any(c in chosen for c in FAST):
        return words  # a configuration chose them, or this ssh cannot say
    order = [c for c in FAST if c in chosen] + [c for c in chosen if c not in FAST]
    return [words[0], "-o", "Ciphers=" + ",".join(order), *words[1:]]
