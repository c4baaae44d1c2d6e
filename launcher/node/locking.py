"""Who holds a cluster's lock, and when that holder is provably gone.

A lock names its owner: host, pid, the process's start time (with the boot it belongs to),
the user, the command and its run id. It is stale only when its owner is provably gone:
it was a process on this machine, and no process has that pid now, or the one that has
it started at another time (the pid was reused). A lock whose owner cannot be seen from
here (another machine) is never broken. (filelock and its kind lock a file on this machine;
this lock is a directory on the nodes, taken through the node agent.)
"""

from __future__ import annotations

import os
import secrets as pysecrets
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from launcher.errors import SparkLaunchError


class ClusterBusy(SparkLaunchError):
    """Another spark-launch holds the cluster's lock."""


def lock_holder(command: str, run_id: str | None = None) -> dict[str, Any]:
    """Who takes the cluster lock: this process, told apart from any later one with its pid."""
    pid = os.getpid()
    return {
        "token": pysecrets.token_hex(8),
        "host": socket.gethostname(),
        "pid": pid,
        "started": process_start(pid),
        "user": os.environ.get("USER", "?"),
        "command": command,
        "run_id": run_id,
        "since": time.time(),
    }


def process_start(pid: int) -> str | None:
    """When process `pid` started, as a stable word (None: there is no such process).

    Linux: the boot's id and the start time in clock ticks since that boot (/proc); elsewhere
    what `ps` says.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except FileNotFoundError:
        return None if Path("/proc/self/stat").exists() else _ps_start(pid)
    except OSError:
        return None
    return f"{boot}:{stat.rsplit(')', 1)[1].split()[19]}"  # field 22: starttime


def _ps_start(pid: int) -> str | None:
    try:
        argv = ["ps", "-o", "lstart=", "-p", str(pid)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError:
        return None
    return " ".join(done.stdout.split()) or None


def holder_is_stale(holder: dict[str, Any]) -> bool:
    """True when the holder was a process on this machine that provably no longer exists."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # answers for every user's process, even where /proc hides them
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    now = process_start(pid)  # None: alive but unreadable here, so not provably gone
    started = holder.get("started")
    return now is not None and isinstance(started, str) and started != now  # the pid was reused


def busy(cluster: str, head: str, other: dict[str, Any]) -> ClusterBusy:
    """The error for a lock held by `other`: who, what, since when."""
    since = time.strftime("%H:%M:%S", time.localtime(other.get("since", 0)))
    run = f", run {other['run_id']}" if other.get("run_id") else ""
    return ClusterBusy(
        f"cluster {cluster} is busy: `{other.get('command', '?')}` by {other.get('user', '?')}@"
        f"{other.get('host', '?')} (pid {other.get('pid', '?')}{run}) since {since}",
        "wait for it to finish; a lock is broken by itself once its owner on this machine is gone, "
        f"else, if that process is gone, remove ~/.spark-launch/{cluster}/lock on {head}",
    )
