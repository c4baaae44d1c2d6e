"""One real Docker engine per node, in the node's network namespace, and the test image in each.

Each daemon has its own data root (kept under the bed dir, so its images survive a
`down`), exec root, socket, pid file and key file (two daemons sharing a key report the
same engine id). A node's SSH sessions reach their own daemon through DOCKER_HOST (set by
the node's sshd), so `docker run --network host` there means that node's network.

Traps this avoids: by default dockerd sets the iptables FORWARD policy to DROP and loads
br_netfilter, which silently cuts traffic between the nodes on the bridge
(--iptables=false --bridge=none); `ip netns exec` remounts /sys and hides the cgroup
mounts dockerd needs (nsenter --net only).

`--gpus all` needs the NVIDIA runtime hook, which dockerd looks up on its PATH: each
daemon finds a FAKE stand-in there that only records the call, so the engine takes its
real GPU path and a test can see that the request reached it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testbed.errors import TestbedError
from testbed.image import Archive
from testbed.layout import Layout, Node
from testbed.shell import alive, cmdline, run, terminate

RUN_ROOT = Path("/run/spark-launch-testbed")  # exec roots: short paths (sockets live there)
HOOK = "nvidia-container-runtime-hook"
FAKE_HOOK = """#!/bin/sh
# FAKE stand-in for the NVIDIA container runtime hook, for the CPU test bed only: dockerd
# registers its GPU driver when it finds this name on its PATH, and runs it before each
# container given --gpus. It records the call (the OCI state arrives on stdin) and does
# nothing else: there is no GPU here.
echo "$* $(cat)" >> "$(dirname "$0")/calls.log"
"""


def exec_root(node: Node) -> Path:
    """The daemon's exec root: its socket and pid file live there."""
    return RUN_ROOT / node.name


def socket_path(node: Node) -> Path:
    """The node's daemon socket."""
    return exec_root(node) / "docker.sock"


def docker_host(node: Node) -> str:
    """DOCKER_HOST for the node's own daemon (set in its SSH sessions by its sshd)."""
    return f"unix://{socket_path(node)}"


def data_root(layout: Layout, node: Node) -> Path:
    """The daemon's images and containers: under the bed dir, so they survive `down`."""
    return layout.node_dir(node) / "docker"


def hook_dir(layout: Layout) -> Path:
    """Where the FAKE GPU hook lives (and its calls.log)."""
    return layout.root / "gpu-stand-in"


def docker(node: Node, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The docker CLI against the node's daemon."""
    return run(["docker", "-H", docker_host(node), *args], check=check)


def pid_of(node: Node) -> int | None:
    """The node's running dockerd, or None."""
    try:
        pid = int((exec_root(node) / "docker.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if alive(pid) and "dockerd" in " ".join(cmdline(pid)) else None  # not a reused pid


def ensure_engines(layout: Layout, archive: Archive) -> dict[str, float]:
    """Every node's daemon up, holding the test image; the seconds each load took (0: had it)."""
    _write_hook(layout)
    for node in layout.nodes:
        if pid_of(node) is None:
            _start(layout, node)
    with ThreadPoolExecutor(max_workers=len(layout.nodes)) as pool:
        list(pool.map(_wait_ready, layout.nodes, [layout] * len(layout.nodes)))
        loads = list(pool.map(lambda n: load_image(n, archive), layout.nodes))
    return {n.name: seconds for n, seconds in zip(layout.nodes, loads, strict=True)}


def load_image(node: Node, archive: Archive) -> float:
    """Load the archive into the node's daemon unless it holds that image under its tag."""
    held = docker(node, "image", "inspect", "--format", "{{.Id}}", archive.tag, check=False)
    if held.returncode == 0 and held.stdout.strip() == archive.image_id:
        return 0.0
    began = time.monotonic()
    tar = subprocess.Popen(
        ["tar", "-C", str(archive.path), "-cf", "-", *archive.members()], stdout=subprocess.PIPE
    )
    load = subprocess.run(
        ["docker", "-H", docker_host(node), "load"],
        stdin=tar.stdout,
        capture_output=True,
        text=True,
        check=False,
    )
    tar.wait()
    if load.returncode != 0 or tar.returncode != 0:
        raise TestbedError(f"loading the test image into {node.name} failed: {load.stderr.strip()[-600:]}")
    docker(node, "image", "prune", "--force", check=False)  # what the tag pointed at before
    return time.monotonic() - began


def stop_engines(layout: Layout) -> list[str]:
    """Stop every bed daemon (each stops its containers first); the nodes they served."""
    nodes = [Node(int(d.name[4:])) for d in RUN_ROOT.glob("node*") if d.name[4:].isdigit()]
    running = {n.name: pid for n in nodes if (pid := pid_of(n)) is not None}
    terminate(list(running.values()), grace=30)
    for node in nodes:
        _unmount_leftovers(layout, node)
    return sorted(running)


def _unmount_leftovers(layout: Layout, node: Node) -> None:
    """Mounts a stopped daemon leaves behind: under its exec root (a handle on its network
    namespace, which would keep the node's namespace alive after `ip netns del`) and its data root."""
    roots = (f"{exec_root(node)}/", str(data_root(layout, node)))
    with open("/proc/self/mounts") as mounts:
        targets = [line.split()[1] for line in mounts if line.split()[1].startswith(roots)]
    for target in sorted(targets, reverse=True):
        run(["umount", "--lazy", target], check=False)


def _start(layout: Layout, node: Node) -> None:
    """Start the node's dockerd in its network namespace (only: see the module's note)."""
    _unmount_leftovers(layout, node)  # of a daemon killed without `testbed down`
    exec_root(node).mkdir(parents=True, exist_ok=True)
    data_root(layout, node).mkdir(parents=True, exist_ok=True)
    config = layout.node_dir(node) / "daemon.json"
    settings: dict[str, object] = {}
    if _major_version() < 23:  # later releases keep the engine id in the data root
        settings["deprecated-key-path"] = str(layout.node_dir(node) / "docker-key.json")
    config.write_text(json.dumps(settings))
    command = [
        "nsenter", f"--net=/run/netns/{node.namespace}",
        "dockerd", f"--config-file={config}",
        f"--data-root={data_root(layout, node)}", f"--exec-root={exec_root(node)}",
        f"--pidfile={exec_root(node) / 'docker.pid'}", f"--host={docker_host(node)}",
        "--iptables=false", "--ip-masq=false", "--bridge=none",
    ]  # fmt: skip
    env = {**os.environ, "PATH": f"{hook_dir(layout)}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    with (layout.node_dir(node) / "dockerd.log").open("ab") as log:
        subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True
        )


def _wait_ready(node: Node, layout: Layout, timeout: float = 60.0) -> None:
    """Wait until the node's daemon answers; its log's tail when it does not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if docker(node, "version", "--format", "{{.Server.Version}}", check=False).returncode == 0:
            return
        time.sleep(0.3)
    log = layout.node_dir(node) / "dockerd.log"
    tail = log.read_text(errors="replace")[-1200:] if log.exists() else "(no log)"
    raise TestbedError(f"dockerd on {node.name} did not answer in {timeout:.0f}s; log:\n{tail}", f"see {log}")


def _write_hook(layout: Layout) -> None:
    hook = hook_dir(layout) / HOOK
    hook.parent.mkdir(parents=True, exist_ok=True)
    if not hook.exists() or hook.read_text() != FAKE_HOOK:
        hook.write_text(FAKE_HOOK)
    hook.chmod(0o755)


def _major_version() -> int:
    found = re.search(r"version (\d+)\.", run(["dockerd", "--version"]).stdout)
    return int(found.group(1)) if found else 0
