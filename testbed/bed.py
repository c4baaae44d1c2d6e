"""The bed's operations: up, down, status, and per-node bind mounts."""

from __future__ import annotations

import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testbed import dockerd, forward, image, links, model, netns, sshd, vllm_env
from testbed.errors import TestbedError
from testbed.layout import BRIDGE, BRIDGE_ADDR, NODE_IFACE, NS_PREFIX, Layout, Node
from testbed.shell import machine_lock, require_root, require_tools, run, terminate

_TOOLS = ("ip", "ssh-keygen", "unshare", "sshd")


def up(
    layout: Layout, *, with_vllm: bool = True, venv_wait: float = 1800.0, docker: bool = False
) -> dict[str, object]:
    """Bring the bed to exactly `layout`: network, sshd per node, configs, vLLM and model;
    with `docker`, a Docker engine per node holding the test image too."""
    require_root()
    require_tools(*_TOOLS)
    if docker:
        if not with_vllm:
            raise TestbedError("--docker needs the vLLM venv (the test image holds it)", "drop --no-vllm")
        require_tools("docker", "dockerd", "debootstrap")
    with machine_lock():
        return _up(layout, with_vllm, venv_wait, docker)


def _up(layout: Layout, with_vllm: bool, venv_wait: float, docker: bool) -> dict[str, object]:
    """up's body, run under the machine lock."""
    _check_dir(layout.root)
    layout.root.mkdir(parents=True, exist_ok=True)
    wanted = {n.namespace for n in layout.nodes}
    for extra in (ns for ns in netns.namespaces() if ns not in wanted):
        _remove_namespace(extra)  # `up --nodes 2` after `--nodes 3` drops node3
    netns.ensure_bridge()
    for node in layout.nodes:
        netns.ensure_node(node)
    opened = forward.ensure_open()  # a system daemon's FORWARD DROP would cut the bridge
    if opened:
        print(opened, file=sys.stderr)
    _ensure_keys(layout)
    _ensure_sshds(layout)
    layout.ssh_config.write_text(sshd.render_ssh_config(layout))
    layout.known_hosts.write_text(sshd.render_known_hosts(layout))
    venv = None
    if with_vllm:
        venv = vllm_env.ensure_venv(venv_wait)
        vllm_env.ensure_py_spy(venv)
        vllm_env.link(venv, layout.vllm)
        python = venv / "bin" / "python"
        for directory, config in ((layout.model, model.CONFIG), (layout.dense_model, model.DENSE_CONFIG)):
            model.write_model(directory, python, config)
            model.write_weights(directory, python)
        vllm_env.link(vllm_env.ensure_router_wheels(), layout.wheels)
    if docker and venv is not None:
        _ensure_docker(layout, venv)
    description = describe(layout, venv)
    layout.description.write_text(json.dumps(description, indent=2) + "\n")
    return description


def down(layout: Layout) -> list[str]:
    """Kill every process in the bed's namespaces, delete them, the veths and the bridge."""
    require_root()
    require_tools("ip")
    with machine_lock():
        return _down(layout)


def _ensure_docker(layout: Layout, venv: Path) -> None:
    """The test image (built if not cached), and every node's engine holding it; times said."""
    archive, built = image.ensure_archive(venv)
    loads = dockerd.ensure_engines(layout, archive)
    said = ", ".join(f"{n} {s:.0f} s" if s else f"{n} had it" for n, s in loads.items())
    print(f"testbed: test image {archive.tag} ready in {built:.0f} s; loaded: {said}", file=sys.stderr)


def _down(layout: Layout) -> list[str]:
    """down's body, run under the machine lock."""
    # Each daemon stops its containers before its namespace goes (that kill has a short grace).
    dockerd.stop_engines(layout)
    removed = []
    for ns in netns.namespaces():
        _remove_namespace(ns)
        removed.append(ns)
    # An sshd whose namespace was deleted by hand would otherwise live on.
    terminate(sshd.stray_sshds(layout))
    for pid_file in layout.root.glob("node*/sshd.pid"):
        pid_file.unlink(missing_ok=True)
    for veth in netns.veths():
        netns.delete_link(veth)
    removed += links.remove_all()
    netns.delete_link(BRIDGE)
    forward.close()
    layout.description.unlink(missing_ok=True)  # it describes a live bed
    return removed


def status(layout: Layout) -> dict[str, object]:
    """What is up now: bridge, and per node namespace, address, sshd pid and env."""
    require_tools("ip")
    present = netns.namespaces()
    indexes = sorted({int(ns[len(NS_PREFIX) :]) for ns in present} | {n.index for n in layout.nodes})
    nodes = [_node_status(layout, Node(i), f"{NS_PREFIX}{i}" in present) for i in indexes]
    bridge = netns.link_exists(BRIDGE)
    return {
        "up": bridge and bool(nodes) and all(n["ok"] for n in nodes),
        "bridge": bridge,
        "dir": str(layout.root),
        "nodes": nodes,
    }


def bind_mount(layout: Layout, node_name: str, source: Path, target: Path, read_only: bool = False) -> None:
    """Bind-mount source over target in one node's mount namespace only (read-only if asked)."""
    pid = _sshd_pid(layout, node_name)
    options = ["-o", "ro"] if read_only else []
    run(["nsenter", "--target", str(pid), "--mount", "mount", "--bind", *options, str(source), str(target)])


def tmpfs_mount(layout: Layout, node_name: str, target: Path, size: str) -> None:
    """Mount a tmpfs of `size` (e.g. 64M) over target in one node's mount namespace only."""
    pid = _sshd_pid(layout, node_name)
    run(
        [
            "nsenter",
            "--target",
            str(pid),
            "--mount",
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size={size}",
            "tmpfs",
            str(target),
        ]
    )


def unbind_mount(layout: Layout, node_name: str, target: Path) -> None:
    """Undo bind_mount on that node."""
    pid = _sshd_pid(layout, node_name)
    run(["nsenter", "--target", str(pid), "--mount", "umount", str(target)])


def add_link(layout: Layout, node_name: str, name: str, cidr: str, bridge: str | None) -> None:
    """An extra interface on one node, wired to an extra bridge (or to nothing)."""
    require_root()
    with machine_lock():
        links.add(_node(layout, node_name), name, cidr, bridge)


def remove_link(layout: Layout, node_name: str, name: str | None) -> list[str]:
    """Delete one node's extra link, or (name None) every extra link and bridge."""
    require_root()
    with machine_lock():
        if name is None:
            return links.remove_all()
        links.remove(_node(layout, node_name), name)
        return [name]


def _node(layout: Layout, node_name: str) -> Node:
    """The running node named like node2, or a clear error."""
    _sshd_pid(layout, node_name)
    return Node(int(node_name[len("node") :]))


def describe(layout: Layout, venv: Path | None) -> dict[str, object]:
    """The content of testbed.json: what tests and specs need to reach the bed."""
    return {
        "dir": str(layout.root),
        "ssh_config": str(layout.ssh_config),
        "known_hosts": str(layout.known_hosts),
        "identity": str(layout.identity),
        "model": str(layout.model),
        "dense_model": str(layout.dense_model),
        "router_wheels": str(layout.wheels),
        "vllm_venv": str(layout.vllm),
        "vllm": str(layout.vllm / "bin" / "vllm"),
        "vllm_venv_target": str(venv) if venv else None,
        "py_spy": str(venv / "bin" / "py-spy") if venv and (venv / "bin" / "py-spy").exists() else None,
        "bridge": {"name": BRIDGE, "address": BRIDGE_ADDR},
        "docker_image": image.TAG if any(dockerd.pid_of(n) for n in layout.nodes) else None,
        "nodes": [
            {
                "name": n.name,
                "ssh_alias": n.name,
                "address": n.address,
                "interface": NODE_IFACE,
                "namespace": n.namespace,
                "env": dict(n.env),
                "docker_host": dockerd.docker_host(n),
                "sshd_log": str(layout.sshd_log(n)),
            }
            for n in layout.nodes
        ],
    }


def _ensure_keys(layout: Layout) -> None:
    """Client key for root, its authorized_keys, and a host key per node (kept across ups)."""
    sshd.ensure_key(layout.identity, "testbed-client")
    layout.authorized_keys.write_text(Path(f"{layout.identity}.pub").read_text())
    for node in layout.nodes:
        sshd.ensure_key(layout.host_key(node), f"testbed-{node.name}")


def _ensure_sshds(layout: Layout) -> None:
    """(Re)start each node's sshd whose config changed or that is not running; wait for all."""
    for node in layout.nodes:
        config = layout.sshd_config(node)
        text = sshd.render_sshd_config(layout, node)
        changed = not config.exists() or config.read_text() != text
        config.write_text(text)
        if changed or sshd.pid_of(layout, node) is None:
            # A restart drops the node's bind mounts: they live in the old mount namespace.
            sshd.stop(layout, node, netns.pids_in(node.namespace))
            sshd.start(layout, node)
    with ThreadPoolExecutor(max_workers=len(layout.nodes)) as pool:
        list(pool.map(lambda n: sshd.wait_ready(layout, n), layout.nodes))


def _remove_namespace(ns: str) -> None:
    """Kill everything in the namespace (sshd, sessions, servers), then delete it."""
    terminate(netns.pids_in(ns))
    netns.delete_namespace(ns)


def _node_status(layout: Layout, node: Node, present: bool) -> dict[str, object]:
    """One node's live state; ok when its namespace, address and sshd are all there."""
    addrs = netns.addresses(node.namespace) if present else []
    pid = sshd.pid_of(layout, node)
    own_mnt = pid is not None and sshd.mount_namespace(pid) != sshd.mount_namespace(os.getpid())
    ok = present and f"{node.address}/24" in addrs and pid is not None
    return {
        "dockerd_pid": dockerd.pid_of(node),
        "name": node.name,
        "namespace": node.namespace,
        "present": present,
        "addresses": addrs,
        "sshd_pid": pid,
        "own_mount_namespace": own_mnt,
        "ok": ok,
    }


def _sshd_pid(layout: Layout, node_name: str) -> int:
    """The running sshd pid of a node named like node2, or a clear error."""
    match = re.fullmatch(r"node([1-9])", node_name)
    pid = sshd.pid_of(layout, Node(int(match.group(1)))) if match else None
    if pid is None:
        raise TestbedError(f"no running sshd for {node_name!r}", "run `python -m testbed up`")
    return pid


def _check_dir(root: Path) -> None:
    """Refuse a state dir that sshd_config and ssh_config could not hold unquoted."""
    if not root.is_absolute() or re.search(r"[\s\"'\\#]", str(root)):
        raise TestbedError(
            f"state dir {str(root)!r} must be absolute, without spaces or quotes",
            "pass e.g. --dir /tmp/spark-launch-testbed",
        )
