"""Keys, configs and one real sshd per node, each in its network and mount namespace."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from testbed import dockerd
from testbed.errors import TestbedError
from testbed.layout import SUBNET, Layout, Node
from testbed.shell import SSHD, alive, all_pids, cmdline, run, terminate

RUN_SSHD = Path("/run/sshd")  # sshd's privilege-separation dir; it refuses to start without


def ensure_key(path: Path, comment: str) -> None:
    """Generate an ed25519 key pair at path unless one is there; keep it 0600."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    path.chmod(0o600)  # sshd ignores a group- or world-readable host key


def render_sshd_config(layout: Layout, node: Node) -> str:
    """The node's sshd_config: key-only root login, no PAM, all state under the bed dir."""
    lines = [
        "# Written by `python -m testbed up`; a change restarts this node's sshd.",
        "Port 22",
        f"ListenAddress {node.address}",
        "ListenAddress 127.0.0.1",
        f"HostKey {layout.host_key(node)}",
        f"PidFile {layout.pid_file(node)}",
        f"AuthorizedKeysFile {layout.authorized_keys}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",  # the keys live under /tmp, whose modes sshd would reject
        "PrintMotd no",
        "X11Forwarding no",
        "MaxStartups 64:30:128",  # tests fan out many sessions at once
        # No `Subsystem sftp`: some hardened hosts have none, and spark-launch needs none.
    ]
    # sshd keeps only the first SetEnv line it reads: every variable goes on one line.
    lines.append("SetEnv " + " ".join(f'"{name}={value}"' for name, value in session_env(layout, node)))
    return "\n".join(lines) + "\n"


def session_env(layout: Layout, node: Node) -> tuple[tuple[str, str], ...]:
    """What every session on the node gets: the bed's own variables, then the node's (which win).

    RSYNC_RSH gives the nodes SSH to each other over the bridge (as operators give Sparks
    keys for each other's fabric address) without touching root's ~/.ssh: ssh reads the
    bed's ssh_config, whose `Host 10.99.0.*` block holds the bed's key and known hosts.

    SHLVL=1 makes each command's shell a stock node's: bash run by sshd sources ~/.bashrc
    only as the first shell level, and a distribution's .bashrc returns at once when not
    interactive. The bed shares this machine's root home, whose .bashrc may not (a pyenv or
    conda init there costs each SSH command a fifth of a second of CPU and puts its shims
    first on PATH): without it a node's PATH is sshd's own, and its python3 the system's.
    """
    # The node's docker CLI talks to the node's own daemon (testbed/dockerd.py), never the host's.
    # Its pip reaches no index: the router's wheels are its index (`up` installs the router).
    own = {
        "RSYNC_RSH": f"ssh -F {layout.ssh_config}",
        "DOCKER_HOST": dockerd.docker_host(node),
        "SHLVL": "1",
        "PIP_FIND_LINKS": str(layout.wheels),
        "PIP_NO_INDEX": "1",
    }
    return tuple({**own, **dict(node.env)}.items())


def render_ssh_config(layout: Layout) -> str:
    """Client config with one Host block per node, strict host keys against our file."""
    client = [
        "    User root",
        f"    IdentityFile {layout.identity}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {layout.known_hosts}",
        "    StrictHostKeyChecking yes",
        "    BatchMode yes",
        "    ConnectTimeout 5",
    ]
    blocks = ["# Written by `python -m testbed up`; use with `ssh -F THIS node1`."]
    for node in layout.nodes:
        blocks.append(
            "\n".join([f"Host {node.name}", f"    HostName {node.address}", "    Port 22", *client])
        )
    reach = "# The nodes reach each other by address (rsync between nodes, see RSYNC_RSH)."
    blocks.append("\n".join([reach, f"Host {SUBNET}.*", *client]))
    return "\n\n".join(blocks) + "\n"


def render_known_hosts(layout: Layout) -> str:
    """known_hosts from the host public keys, under both the alias and the address."""
    lines = []
    for node in layout.nodes:
        keytype, key = Path(f"{layout.host_key(node)}.pub").read_text().split()[:2]
        lines.append(f"{node.name},{node.address} {keytype} {key}")
    return "\n".join(lines) + "\n"


def pid_of(layout: Layout, node: Node) -> int | None:
    """The pid of the node's running sshd listener, or None."""
    try:
        pid = int(layout.pid_file(node).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if alive(pid) and _is_ours(pid, layout.sshd_config(node)) else None


def stray_sshds(layout: Layout) -> list[int]:
    """Every live sshd started from a config under this bed's dir, pid file or not."""
    marker = f"{layout.root}/"
    return [p for p in all_pids() if alive(p) and _is_ours(p, None) and marker in " ".join(cmdline(p))]


def start(layout: Layout, node: Node) -> None:
    """Start the node's sshd in its network namespace and a private mount namespace."""
    RUN_SSHD.mkdir(mode=0o755, exist_ok=True)
    RUN_SSHD.chmod(0o755)
    config = layout.sshd_config(node)
    run([str(SSHD), "-t", "-f", str(config)])  # a config error, said plainly, before starting
    layout.pid_file(node).unlink(missing_ok=True)
    # A private mount namespace per node lets a test bind-mount a file on this node only;
    # sshd then daemonizes, so unshare and `ip netns exec` return at once.
    in_node = ["ip", "netns", "exec", node.namespace, "unshare", "--mount", "--propagation", "private"]
    run([*in_node, str(SSHD), "-f", str(config), "-E", str(layout.sshd_log(node))])


def wait_ready(layout: Layout, node: Node, timeout: float = 10.0) -> int:
    """Wait until the node's sshd has written its pid and accepts TCP; return the pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = pid_of(layout, node)
        if pid is not None and _port_open(node.address, 22):
            return pid
        time.sleep(0.05)
    log = layout.sshd_log(node)
    tail = log.read_text()[-800:] if log.exists() else "(no log)"
    raise TestbedError(
        f"sshd on {node.name} did not come up in {timeout:.0f}s; log:\n{tail}",
        f"see {log}; try `python -m testbed down` then `up`",
    )


def stop(layout: Layout, node: Node, namespace_pids: list[int]) -> None:
    """Stop every sshd listener in the node's namespace, ours or one from another --dir."""
    # A listener left by a bed with another state dir would hold port 22 and block ours.
    terminate([p for p in namespace_pids if _is_ours(p, None)])
    layout.pid_file(node).unlink(missing_ok=True)


def mount_namespace(pid: int) -> str:
    """The mount namespace id of pid (e.g. mnt:[4026532...])."""
    return os.readlink(f"/proc/{pid}/ns/mnt")


def _is_ours(pid: int, config: Path | None) -> bool:
    """True if pid is an sshd listener started with `-f config` (any config when None)."""
    args = " ".join(cmdline(pid))
    # sshd rewrites its title to "sshd: /usr/sbin/sshd -f ... [listener] ...".
    return "sshd" in args and " -f " in args and (config is None or str(config) in args)


def _port_open(address: str, port: int) -> bool:
    """True if a TCP connection to address:port succeeds (the host sits on the bridge)."""
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False
