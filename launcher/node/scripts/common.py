"""What every node script shares: JSON out, state files, and finding our processes.

The node scripts are standalone: standard library only, Python 3.8 or newer, nothing
installed on the nodes. The launcher sends one script at a time on the stdin of
`python3 - NAME DIR ARGS...`, with this file inlined in front of it (see `bundle`). DIR is the
node's run directory, `~/.spark-launch/<cluster>/<node>`.

Every process spark-launch starts carries SPARK_LAUNCH_RUN=<cluster>/<node>/<run id> in
its environment: processes are ours by that marker, never by a pid file.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from typing import Any

MARKER = "SPARK_LAUNCH_RUN"


def emit(**fields: Any) -> None:
    """Print the one JSON line the launcher reads."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def read_json(path: str, default: Any = None) -> Any:
    """A JSON file's content, or `default` when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def take_json(path: str) -> Any:
    """A job file's content (None when unreadable); the file is removed at once."""
    data = read_json(path)
    with contextlib.suppress(OSError):
        os.remove(path)
    return data


def write_json(path: str, data: Any) -> None:
    """Replace a JSON file atomically."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_text(path: str | None) -> str | None:
    """A small file's text, or None."""
    try:
        with open(str(path)) as f:
            return f.read()
    except OSError:
        return None


def our_processes(prefix: str) -> dict[int, int]:
    """{pid: pgid} of live (non-zombie) processes whose environment carries the marker prefix."""
    found = {}
    needle = f"{MARKER}={prefix}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            if not any(item.startswith(needle) for item in environ):
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):  # a zombie is gone for our purposes
            found[pid] = int(fields[2])
    return found


def node_prefix(directory: str) -> str:
    """The marker prefix of this node's processes: <cluster>/<node>/."""
    cluster, node = directory.rstrip("/").split("/")[-2:]
    return f"{cluster}/{node}/"


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI, capturing its output."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def container_state(name: str) -> dict[str, Any]:
    """Whether the container exists and runs, and its exit status."""
    done = docker("inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", name)
    if done.returncode != 0:
        return {"exists": False, "running": False, "exit_code": None}
    running, code = [*done.stdout.split(), "false", "0"][:2]
    return {
        "exists": True,
        "running": running == "true",
        "exit_code": int(code) if running != "true" else None,
    }


def state_path(directory: str) -> str:
    """The node's state.json: what runs (or last ran) here."""
    return os.path.join(directory, "state.json")


def run_directory(argv: list[str]) -> str:
    """The run directory from the command line, absolute."""
    return os.path.abspath(os.path.expanduser(argv[0]))
