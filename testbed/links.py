"""Extra network links on bed nodes, for tests of how `init` picks the fabric.

Each extra link is a veth pair: one end inside the node's namespace under the name the
test asks for (so two nodes can name their fabric differently), the other end on the host,
either enslaved to an extra bridge (nodes on one bridge reach each other) or left alone
(an address nothing answers: a subnet shared by name but not by wire). `remove_all`
(called by `down`) deletes every extra link and bridge.
"""

from __future__ import annotations

import ipaddress
import json
import re

from testbed.errors import TestbedError
from testbed.layout import NODE_IFACE, Node
from testbed.netns import link_exists
from testbed.shell import run

HOST_PREFIX = "sltbx"  # host-side ends: sltbx<node index>-<name>, at most 15 characters
BRIDGE_PREFIX = "sltbf"  # extra bridges
NAME = re.compile(r"[a-z][a-z0-9]{0,7}\Z")


def host_side(node: Node, name: str) -> str:
    """The host-side end of node's extra link `name`."""
    return f"{HOST_PREFIX}{node.index}-{name}"


def add(node: Node, name: str, cidr: str, bridge: str | None) -> None:
    """Give the node interface `name` with address `cidr`, wired to `bridge` (or to nothing)."""
    _check(name, cidr, bridge)
    outside = host_side(node, name)
    if link_exists(outside):
        raise TestbedError(f"{node.name} already has an extra link {name}", f"`link del {node.name} {name}`")
    run(["ip", "link", "add", outside, "type", "veth", "peer", "name", name, "netns", node.namespace])
    run(["ip", "-n", node.namespace, "addr", "add", cidr, "dev", name])
    run(["ip", "-n", node.namespace, "link", "set", name, "up"])
    if bridge:
        if not link_exists(bridge):
            run(["ip", "link", "add", bridge, "type", "bridge"])
        run(["ip", "link", "set", bridge, "up"])
        run(["ip", "link", "set", outside, "master", bridge])
    run(["ip", "link", "set", outside, "up"])


def remove(node: Node, name: str) -> None:
    """Delete the node's extra link `name` (both ends go together)."""
    if link_exists(host_side(node, name)):
        run(["ip", "link", "del", host_side(node, name)])


def remove_all() -> list[str]:
    """Delete every extra link and extra bridge of the bed; their names."""
    out = run(["ip", "-j", "link", "show"]).stdout.strip()
    names = [entry["ifname"] for entry in json.loads(out or "[]")]
    gone = sorted(n for n in names if n.startswith((HOST_PREFIX, BRIDGE_PREFIX)))
    for name in gone:
        if link_exists(name):
            run(["ip", "link", "del", name])
    return gone


def _check(name: str, cidr: str, bridge: str | None) -> None:
    if not NAME.match(name) or name in (NODE_IFACE, "lo"):
        raise TestbedError(f"bad link name {name!r}", "lower-case letters and digits, at most 8, not eth0")
    try:
        ipaddress.ip_interface(cidr)
    except ValueError:
        raise TestbedError(f"bad address {cidr!r}", "write it with its prefix, e.g. 10.97.0.1/24") from None
    if "/" not in cidr:
        raise TestbedError(f"bad address {cidr!r}", "write it with its prefix, e.g. 10.97.0.1/24")
    if bridge is not None and not re.fullmatch(rf"{BRIDGE_PREFIX}[a-z0-9]{{1,8}}", bridge):
        raise TestbedError(
            f"bad bridge {bridge!r}", f"name it {BRIDGE_PREFIX}<letters/digits>, e.g. {BRIDGE_PREFIX}1"
        )
