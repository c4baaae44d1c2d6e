"""The test bed's nodes with a login shell that does real work, for benchmarks only.

Real nodes' shells often start slowly: a `.bashrc` with pyenv's or conda's init costs every SSH
command about 0.3 s of CPU before the command runs. The bed's own sshd deliberately avoids that
(testbed/sshd.py: SHLVL=1, so bash skips the shared root home's .bashrc), and the tests rely on
it. So this starts a SECOND sshd per node, in the node's network namespace, on port PORT, with
the bed's own config but for one more variable: BASH_ENV names a start-up file that does
`seconds` of CPU work (a bash loop calibrated here), which bash runs for every command sshd
starts (`bash -c COMMAND`), as it runs a .bashrc. The file unsets BASH_ENV first, so the shells
the command itself starts do not pay it again (a .bashrc is read by the SSH command's shell
only). Tunnels (direct-tcpip channels) start no shell, there as on a real node.

The bed's sshd on port 22, its ssh_config and known_hosts stay as they are: what the e2e tests
see does not change. `slow_shells()` yields an ssh_config reaching the nodes through the slow
sshds, and stops them after.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

BED = Path("/tmp/spark-launch-testbed")
HERE = Path("/tmp/spark-launch-bench-shell")  # outside the bed's folder: never taken for one of its sshds
PORT = 2222
SSHD = "/usr/sbin/sshd"
NODES = {"node1": ("sl-node1", "10.99.0.1"), "node2": ("sl-node2", "10.99.0.2")}
PROBE_LOOPS = 200_000


def calibrate(seconds: float) -> int:
    """How many turns of the start-up file's loop take `seconds` of CPU in bash here."""
    script = f"i=0; while ((i < {PROBE_LOOPS})); do ((i++)); done"
    best = min(_child_cpu(script) for _ in range(3))
    return max(1, int(PROBE_LOOPS * seconds / best))


def _child_cpu(script: str) -> float:
    """CPU seconds a `bash -c script` took (its own, not the wall clock's)."""
    before = os.times()
    subprocess.run(["bash", "-c", script], check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def startup_file(loops: int, tally: Path) -> str:
    """What every SSH command's shell runs first: the loop, as a slow .bashrc would cost; and a
    line in `tally`, so that a benchmark can count the commands a node was sent."""
    return (
        "# Written by bench/slow_shell.py: a .bashrc's cost (pyenv, conda init) for every SSH command.\n"
        "unset BASH_ENV  # the command's own shells do not read it again\n"
        f"echo >> {tally}\n"
        f"__i=0; while ((__i < {loops})); do ((__i++)); done; unset __i\n"
    )


def commands(node: str) -> int:
    """SSH commands the slow sshd of `node` has started a shell for so far."""
    with contextlib.suppress(OSError):
        return len((HERE / f"{node}.commands").read_bytes())
    return 0


def connections(node: str) -> int:
    """SSH connections the slow sshd of `node` has accepted so far."""
    with contextlib.suppress(OSError):
        return (HERE / f"{node}.log").read_text().count("Accepted publickey")
    return 0


def sshd_config(node: str) -> str:
    """The bed's config for `node`, on PORT, with its own pid file and BASH_ENV added."""
    own = {"Port": f"Port {PORT}", "PidFile": f"PidFile {HERE / f'{node}.pid'}"}
    lines = ["# Written by bench/slow_shell.py from the bed's own; removed after the benchmark."]
    for line in (BED / node / "sshd_config").read_text().splitlines():
        key = line.split(" ", 1)[0]
        if key == "SetEnv":  # sshd keeps the first SetEnv line only: one more variable on it
            lines.append(f'{line} "BASH_ENV={HERE / f"{node}.bashrc"}"')
        elif not line.startswith("#"):
            lines.append(own.get(key, line))
    return "\n".join(lines) + "\n"


def ssh_config() -> str:
    """The bed's ssh_config with the nodes on PORT and host keys known under [host]:PORT."""
    own = {"Port": f"    Port {PORT}", "UserKnownHostsFile": f"    UserKnownHostsFile {HERE / 'known_hosts'}"}
    lines = (BED / "ssh_config").read_text().splitlines()
    return "\n".join(own.get(line.strip().split(" ", 1)[0], line) for line in lines) + "\n"


def known_hosts() -> str:
    """The bed's known hosts, each under its name and address with PORT."""
    lines = []
    for line in (BED / "known_hosts").read_text().splitlines():
        names, rest = line.split(" ", 1)
        lines.append(",".join(f"[{n}]:{PORT}" for n in names.split(",")) + " " + rest)
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def slow_shells(seconds: float) -> Iterator[Path]:
    """A slow sshd per node (each command's shell first spends `seconds` of CPU); the ssh_config
    reaching the nodes through them. Stopped after."""
    shutil.rmtree(HERE, ignore_errors=True)
    HERE.mkdir(mode=0o755)
    loops = calibrate(seconds)
    for node in NODES:
        (HERE / f"{node}.bashrc").write_text(startup_file(loops, HERE / f"{node}.commands"))
    (HERE / "known_hosts").write_text(known_hosts())
    config = HERE / "ssh_config"
    config.write_text(ssh_config())
    started: list[str] = []
    try:
        for node, (namespace, address) in NODES.items():
            path = HERE / f"{node}.sshd_config"
            path.write_text(sshd_config(node))
            subprocess.run([SSHD, "-t", "-f", str(path)], check=True)
            log = HERE / f"{node}.log"
            subprocess.run(
                ["ip", "netns", "exec", namespace, SSHD, "-f", str(path), "-E", str(log)], check=True
            )
            started.append(node)
            _wait_port(address)
        yield config
    finally:
        for node in started:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((HERE / f"{node}.pid").read_text().split()[0]), signal.SIGTERM)


def _wait_port(address: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((address, PORT), timeout=0.5):
            return
        time.sleep(0.05)
    raise SystemExit(f"the slow sshd on {address}:{PORT} did not come up; see {HERE}")
