"""Running commands and handling processes: the only module that spawns or signals."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from testbed.errors import TestbedError

# What each tool is for and where Debian ships it, for the "missing tool" hint.
_TOOLS = {
    "ip": "iproute2",
    "ssh-keygen": "openssh-client",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "docker": "docker.io",
    "dockerd": "docker.io",
    "debootstrap": "debootstrap",
}
LOCK = Path("/run/lock/spark-launch-testbed.lock")
SSHD = Path("/usr/sbin/sshd")  # sshd refuses to run unless started by absolute path


def require_root() -> None:
    """Fail with a hint unless running as root (namespaces need CAP_NET_ADMIN, sshd root)."""
    if os.geteuid() != 0:
        raise TestbedError(
            "must run as root: network namespaces, veths and sshd need it",
            "run `sudo python -m testbed ...` (or use a root container / CI runner)",
        )


def require_tools(*names: str) -> None:
    """Fail with an apt-get hint for the first tool that is not installed."""
    for name in names:
        if name == "sshd" and not SSHD.is_file():
            raise TestbedError(f"{SSHD} not found", "apt-get install -y openssh-server")
        if name != "sshd" and shutil.which(name) is None:
            pkg = _TOOLS.get(name, name)
            raise TestbedError(f"`{name}` not found on PATH", f"apt-get install -y {pkg}")


def run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run argv, capture its output; on failure raise with the command and its stderr."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise TestbedError(f"cannot run {argv[0]}: {exc.strerror}") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise TestbedError(f"`{' '.join(argv)}` failed ({proc.returncode}): {detail}")
    return proc


def alive(pid: int) -> bool:
    """True if pid runs; a zombie counts as gone (kill -0 still succeeds on one)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the parenthesised comm, which may itself hold spaces or ")".
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cmdline(pid: int) -> list[str]:
    """The argv of pid, or [] when it is gone or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def all_pids() -> list[int]:
    """Every pid currently listed in /proc."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def terminate(pids: Iterable[int], grace: float = 5.0) -> None:
    """SIGTERM each pid, wait up to `grace` seconds, then SIGKILL what is left."""
    pending = [p for p in pids if p != os.getpid()]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        for pid in pending:
            _signal(pid, sig)
        deadline = time.monotonic() + wait
        while pending and time.monotonic() < deadline:
            time.sleep(0.05)
            pending = [p for p in pending if alive(p)]
        if not pending:
            return
    raise TestbedError(f"processes survived SIGKILL: {pending}")


def _signal(pid: int, sig: signal.Signals) -> None:
    """Send sig, ignoring a pid that has already gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """Hold a machine-wide lock: the bridge and namespace names are global, so two
    concurrent `up`/`down` runs (even with different --dir) would race on them."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
