"""Node facts shaped as the discover script reports them, for the fast tests of `init`."""

from __future__ import annotations

import copy
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from launcher.node.scripts import discover
from tests.conftest import ROOT

SPARK_TREE = ROOT / "tests" / "data" / "sysfs-dgx-spark"


@functools.cache
def spark_sys() -> Path:
    """A DGX Spark's /sys as the discover script reads it, built once per test process.

    The committed tree lacks each interface's and RDMA device's `device` link: in sysfs it
    points back up at its PCI function (`../..`), a loop, and a loop in the repository
    makes every walk of it (setuptools' file list in `pip install -e .`) run forever.
    """
    root = Path(tempfile.mkdtemp(prefix="sysfs-dgx-spark-")) / "sys"
    shutil.copytree(SPARK_TREE, root, symlinks=True)
    for kind in ("net", "infiniband"):
        for entry in list(root.glob(f"devices/**/{kind}/*")):
            if entry.is_dir() and not entry.is_symlink():
                (entry / "device").symlink_to("../..")
    return root


QWEN_NEXT = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "layer_types": ["linear_attention", "full_attention"],
}
DENSE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}


def address(addr: str, prefix: int = 24) -> dict[str, Any]:
    """One IPv4 address as `ip -o addr` gives it."""
    return {"address": addr, "prefix": prefix, "family": "inet", "scope": "global"}


def iface(
    name: str, *addrs: str, speed: int | None = 10000, rdma: tuple[str, ...] = (), state: str = "up"
) -> dict[str, Any]:
    """An interface; `rdma` names active RDMA devices behind it (the first its own, others twins)."""
    devices = [
        {"device": d, "via": "netdev" if i == 0 else "twin", "pci": None, "state": "ACTIVE", "rate": None}
        for i, d in enumerate(rdma)
    ]
    return {
        "name": name,
        "state": state,
        "loopback": name == "lo",
        "speed": speed,
        "mtu": 1500,
        "pci": None,
        "addresses": [address(a.split("/")[0], int(a.split("/")[1]) if "/" in a else 24) for a in addrs],
        "rdma": devices,
    }


def spark_interfaces(lan: str, fabric: str | None) -> list[dict[str, Any]]:
    """A DGX Spark's interfaces, read from the sysfs-shaped tree, with the LAN and fabric addresses."""
    addresses = {"enP7s7": [address(lan)], "lo": [address("127.0.0.1", 8)]}
    if fabric:
        addresses["enp1s0f1np1"] = [address(fabric)]
    return discover.interfaces(str(spark_sys()), addresses)


def vllm(version: str = "0.32.0", build: str = "b1", venv: str = "/opt/vllm") -> dict[str, Any]:
    """A venv's vllm facts as facts.vllm_facts reports them."""
    return {
        "venv": venv,
        "vllm_binary": True,
        "vllm_version": version,
        "vllm_distribution": "vllm",
        "vllm_build": build,
    }


def model(path: str = "/models/m", config: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    """A complete model directory as discover's model_check reports it."""
    return {
        "path": path,
        "exists": True,
        "config": copy.deepcopy(QWEN_NEXT if config is None else config),
        "tokenizer": ["tokenizer.json"],
        "weights": 2,
        "weight_bytes": 2 << 30,
        "missing_shards": [],
        **changes,
    }


def node(
    interfaces: list[dict[str, Any]],
    ssh: str | None = None,
    gpus: list[str] | None = None,
    boot: str = "boot-a",
    **extra: Any,
) -> dict[str, Any]:
    """One node's discover answer."""
    return {
        "ok": True,
        "hostname": "h",
        "python": "3.12.3",
        "boot_id": boot,
        "ssh_address": ssh,
        "interfaces": interfaces,
        "host": {"gpus": gpus, "MemTotal": 128 << 30, "MemAvailable": 100 << 30},
        "vllm": vllm(),
        "model": model(),
        **extra,
    }


def spark_pair(**extra: Any) -> dict[str, dict[str, Any]]:
    """Two DGX Sparks: LAN on enP7s7 (where SSH arrives), the fabric cabled on enp1s0f1np1."""
    gb10 = ["NVIDIA GB10, 122502 MiB, 2000 MiB, 580.95.05"]
    return {
        "spark-1": node(spark_interfaces("192.168.1.11", "10.0.0.1"), "192.168.1.11", gb10, "b1", **extra),
        "spark-2": node(spark_interfaces("192.168.1.12", "10.0.0.2"), "192.168.1.12", gb10, "b2", **extra),
    }


def bed_pair(**extra: Any) -> dict[str, dict[str, Any]]:
    """Two CPU-only namespace nodes on one machine (one boot id), eth0 on 10.99.0.0/24."""
    return {
        f"node{i}": node([iface("lo", "127.0.0.1/8"), iface("eth0", f"10.99.0.{i}")], f"10.99.0.{i}", **extra)
        for i in (1, 2)
    }
