"""What a cluster left running, seen from outside the launcher, and removed.

A process is the cluster's when its environment carries the run marker
(SPARK_LAUNCH_RUN=<cluster>/<node>/<run id>), when it shares a session with such a process
(vLLM's workers rename themselves with setproctitle, which wipes the environment that
/proc/PID/environ shows), or when it works in one of the cluster's run directories
(<run root>/<cluster>/<node>, where every rank starts). Containers are the cluster's by
their label. The bed's nodes share this machine's processes, so one look here sees every
node. Processes of other PID namespaces (inside containers) are counted when looking, but left
to their engine when killing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MARKER = b"SPARK_LAUNCH_RUN="
LABEL = "spark-launch.cluster"


@dataclass(frozen=True)
class Process:
    """A live process as /proc shows it."""

    pid: int
    session: int
    marker: str | None  # <cluster>/<node>/<run id>, when its environment still holds it
    cwd: str | None
    args: str

    def __str__(self) -> str:
        whose = self.marker or self.cwd or f"session {self.session}"
        return f"pid {self.pid} ({whose}): {self.args[:120]}"


def _read(pid: int, every_namespace: bool) -> Process | None:
    """The process, or None when it is gone, a zombie, or (unless `every_namespace`) in another
    PID namespace."""
    base = Path("/proc") / str(pid)
    try:
        if not every_namespace and os.readlink(base / "ns" / "pid") != os.readlink("/proc/self/ns/pid"):
            return None
        fields = (base / "stat").read_text().rsplit(")", 1)[1].split()
        environ = (base / "environ").read_bytes().split(b"\0")
        args = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    marker = next((e[len(MARKER) :].decode(errors="replace") for e in environ if e.startswith(MARKER)), None)
    try:
        cwd: str | None = os.readlink(base / "cwd")
    except OSError:
        cwd = None
    return Process(pid, int(fields[3]), marker, cwd, args)


def _ancestors() -> set[int]:
    """This process and those above it: never the cluster's, whatever their directory."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def processes(every_namespace: bool = False) -> list[Process]:
    """Every live process but this one and its ancestors: of this PID namespace, or (to look,
    not to kill) of every one, containers' included."""
    mine = _ancestors()
    found = (
        _read(int(e), every_namespace) for e in os.listdir("/proc") if e.isdigit() and int(e) not in mine
    )
    return [p for p in found if p is not None]


def of(prefix: str, run_root: Path, seen: Iterable[Process] | None = None) -> list[Process]:
    """The processes of `prefix` (<cluster> or <cluster>/<node>) whose runs live under run_root,
    among `seen` (default: this PID namespace's)."""
    everything = list(processes() if seen is None else seen)
    needle = prefix.rstrip("/") + "/"
    directory = str(run_root.resolve() / prefix.rstrip("/"))
    marked = {p.session for p in everything if p.marker and p.marker.startswith(needle)}
    marked -= {0, 1, os.getsid(0)}  # a session the runs did not make themselves is no evidence
    return [
        p
        for p in everything
        if (p.marker and p.marker.startswith(needle))
        or p.session in marked
        or (p.cwd is not None and (p.cwd == directory or p.cwd.startswith(directory + "/")))
    ]


def kill(found: Iterable[Process]) -> None:
    """SIGKILL (it also ends a stopped process) each of them."""
    for process in found:
        try:
            os.kill(process.pid, signal.SIGKILL)
        except OSError:
            continue


def reap(prefix: str, run_root: Path, seconds: float = 10) -> list[Process]:
    """Kill what `prefix` left running (again while new ones appear); what was found at first."""
    first = of(prefix, run_root)
    deadline, left = time.monotonic() + seconds, first
    while left and time.monotonic() < deadline:
        kill(left)
        time.sleep(0.1)
        left = of(prefix, run_root)
    return first


def containers(sockets: Iterable[Path]) -> dict[str, list[tuple[Path, str]]]:
    """{cluster: [(engine socket, container id), ...]} of the running labelled containers."""
    found: dict[str, list[tuple[Path, str]]] = {}
    for sock in (s for s in sockets if s.is_socket()):
        listing = ("ps", "--filter", f"label={LABEL}", "--format", f'{{{{.ID}}}} {{{{.Label "{LABEL}"}}}}')
        done = subprocess.run(
            ["docker", "-H", f"unix://{sock}", *listing],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        for line in done.stdout.splitlines() if done.returncode == 0 else []:
            if len(line.split()) == 2:
                found.setdefault(line.split()[1], []).append((sock, line.split()[0]))
    return found


def remove(found: Iterable[tuple[Path, str]]) -> None:
    """docker rm --force each container on its engine."""
    for sock, cid in found:
        subprocess.run(
            ["docker", "-H", f"unix://{sock}", "rm", "--force", cid],
            capture_output=True,
            check=False,
            timeout=120,
        )
