"""RDMA devices and their ports as sysfs shows them. A library of the scripts that use it.

Every reader takes the root of a tree shaped like /sys, so the DGX Spark's layout is tested on
a copy (tests/data/sysfs-dgx-spark) by the same code that reads the real /sys.
"""

from __future__ import annotations

import glob
import os
import re

from .common import read_text

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

PCI = re.compile(r"^([0-9a-fA-F]{4,}):([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])$")


def sys_text(root: str, *parts: str) -> str | None:
    """A sysfs attribute's text, stripped; None when absent or unreadable (a down link's speed)."""
    text = read_text(os.path.join(root, *parts))
    return text.strip() if text is not None else None


def pci_of(path: str) -> str | None:
    """The PCI address (dddd:bb:dd.f) a sysfs `device` link points to; None for a virtual device."""
    if not os.path.exists(path):
        return None
    name = os.path.basename(os.path.realpath(path))
    return name if PCI.match(name) else None


def rdma_devices(root: str) -> list[dict[str, Any]]:
    """Every RDMA device: its PCI function, its netdevs, and each port's state, link layer and rate."""
    base = os.path.join(root, "class", "infiniband")
    found = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        # The netdevs of the device's PCI function (what ibdev2netdev reads first).
        netdevs = {os.path.basename(p) for p in glob.glob(os.path.join(base, name, "device", "net", "*"))}
        ports = []
        for port in sorted(glob.glob(os.path.join(base, name, "ports", "*"))):
            # RoCE: the netdev each GID belongs to (what ibdev2netdev and `rdma link` show).
            for ndev in glob.glob(os.path.join(port, "gid_attrs", "ndevs", "*")):
                value = sys_text(ndev)
                if value:
                    netdevs.add(value)
            ports.append(
                {
                    "port": os.path.basename(port),
                    "state": (sys_text(port, "state") or "").split(":")[-1].strip() or None,
                    "link_layer": sys_text(port, "link_layer"),
                    "rate": sys_text(port, "rate"),
                }
            )
        found.append(
            {
                "device": name,
                "pci": pci_of(os.path.join(base, name, "device")),
                # The adapter's vendor and device id: twins are functions of one adapter.
                "pci_id": _pci_id(os.path.join(base, name, "device")),
                "sys_image_guid": sys_text(base, name, "sys_image_guid"),
                "fw_ver": sys_text(base, name, "fw_ver"),  # the adapter's firmware
                "netdevs": sorted(netdevs),
                "ports": ports,
            }
        )
    return found


def twins(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """True for two RDMA devices of one port reached over two PCIe links.

    A DGX Spark's ConnectX-7 hangs off two PCIe x4 links; each port appears once per link,
    as the same bus:device.function in PCI domains 0000 and 0002 (rocep1s0f1 and
    roceP2p1s0f1), of one adapter: the same system image GUID (two cards of one model in
    two domains have two). NCCL needs both RoCE devices for the port's full bandwidth.
    """
    a, b = PCI.match(one["pci"] or ""), PCI.match(other["pci"] or "")
    if not (a and b and a.group(2) == b.group(2) and a.group(1) != b.group(1)):
        return False
    if one["sys_image_guid"] and other["sys_image_guid"]:
        return bool(one["sys_image_guid"] == other["sys_image_guid"])
    return one["pci_id"] is not None and one["pci_id"] == other["pci_id"]


def rdma_of(netdev: str, devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The RDMA devices behind a netdev: its own (by netdev), then their twins (same port)."""
    own = [d for d in devices if netdev in d["netdevs"]]
    twin = [d for d in devices if d not in own and any(twins(o, d) for o in own)]
    out = []
    for via, dev in [("netdev", d) for d in own] + [("twin", d) for d in twin]:
        states = [p["state"] for p in dev["ports"] if p["state"]]
        out.append(
            {
                "device": dev["device"],
                "via": via,
                "pci": dev["pci"],
                "fw_ver": dev["fw_ver"],
                "state": states[0] if states else None,
                "link_layer": next((p["link_layer"] for p in dev["ports"] if p["link_layer"]), None),
                "rate": next((p["rate"] for p in dev["ports"] if p["rate"]), None),
            }
        )
    return out


def _pci_id(device: str) -> str | None:
    """The PCI function's vendor:device id."""
    vendor, model = sys_text(device, "vendor"), sys_text(device, "device")
    return f"{vendor}:{model}" if vendor and model else None
