"""The network: one bridge, and per node a namespace joined to it by a veth pair."""

from __future__ import annotations

import json
import re

from testbed.layout import BRIDGE, BRIDGE_ADDR, NODE_IFACE, NS_PREFIX, PREFIX_LEN, VETH_PREFIX, Node
from testbed.shell import run


def ensure_bridge() -> None:
    """Create the bridge with its address if missing, and bring it up."""
    if not link_exists(BRIDGE):
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    # `replace` instead of `add`: a second `up` must not fail on an existing address.
    run(["ip", "addr", "replace", f"{BRIDGE_ADDR}/{PREFIX_LEN}", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])


def ensure_node(node: Node) -> None:
    """Create the node's namespace and veth (eth0 inside), address it, bring it all up."""
    if node.namespace not in namespaces():
        run(["ip", "netns", "add", node.namespace])
    ns = ["ip", "-n", node.namespace]
    run([*ns, "link", "set", "lo", "up"])  # lo is down in a new namespace
    if not link_exists(node.veth):
        # Create the peer straight inside the namespace, already named eth0.
        run(
            [
                "ip",
                "link",
                "add",
                node.veth,
                "type",
                "veth",
                "peer",
                "name",
                NODE_IFACE,
                "netns",
                node.namespace,
            ]
        )
    run([*ns, "addr", "replace", f"{node.address}/{PREFIX_LEN}", "dev", NODE_IFACE])
    run([*ns, "link", "set", NODE_IFACE, "up"])
    run(["ip", "link", "set", node.veth, "master", BRIDGE, "up"])


def namespaces() -> list[str]:
    """The bed's namespaces that exist now (sl-node1, ...), whoever made them."""
    out = run(["ip", "-j", "netns", "list"]).stdout.strip()
    names = [entry["name"] for entry in json.loads(out or "[]")]
    return sorted(n for n in names if re.fullmatch(rf"{NS_PREFIX}\d+", n))


def veths() -> list[str]:
    """The host-side veths of the bed that exist now."""
    out = run(["ip", "-j", "link", "show"]).stdout.strip()
    names = [entry["ifname"] for entry in json.loads(out or "[]")]
    return sorted(n for n in names if re.fullmatch(rf"{VETH_PREFIX}\d+", n))


def link_exists(name: str, namespace: str | None = None) -> bool:
    """True if the interface exists (in the namespace, when given)."""
    where = ["-n", namespace] if namespace else []
    return run(["ip", *where, "link", "show", name], check=False).returncode == 0


def addresses(namespace: str, iface: str = NODE_IFACE) -> list[str]:
    """The IPv4 addresses (with prefix) of iface inside the namespace; [] if absent."""
    proc = run(["ip", "-j", "-n", namespace, "-4", "addr", "show", iface], check=False)
    if proc.returncode != 0:
        return []
    return [
        f"{a['local']}/{a['prefixlen']}"
        for link in json.loads(proc.stdout or "[]")
        for a in link.get("addr_info", [])
    ]


def pids_in(namespace: str) -> list[int]:
    """Every process living in the namespace: sshd, its sessions, anything they started."""
    proc = run(["ip", "netns", "pids", namespace], check=False)
    return [int(p) for p in proc.stdout.split()] if proc.returncode == 0 else []


def delete_namespace(namespace: str) -> None:
    """Delete the namespace; its eth0 goes with it, taking the host-side veth along."""
    run(["ip", "netns", "del", namespace], check=False)


def delete_link(name: str) -> None:
    """Delete an interface if it is still there."""
    if link_exists(name):
        run(["ip", "link", "del", name])
