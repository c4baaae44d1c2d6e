"""What `check` compares of the host itself. A library of the scripts that use it.

The kernel and its command line, the CMA counters of /proc/meminfo (the sign of a known
kernel regression), the NVIDIA driver and the CUDA version it supports, the fabric
interface's link (state, speed, MTU), every RDMA device of its port (listed in the spec or
not: both twins of a DGX Spark port), the NIC firmware, the BIOS, the NCCL of the node's
vLLM venv, the Docker storage driver and the open-file limit.

Every reader takes the roots of trees shaped like /proc and /sys, so the layout a DGX Spark
shows is tested on copies (tests/data/procfs-dgx-spark, tests/data/sysfs-dgx-spark) by the
same code that reads the real ones. Everything is read afresh on every call: nothing here is
cached, so a change made since the last check (an MTU put back) is what the next one sees.
"""

from __future__ import annotations

import os
import re
import subprocess

from .common import ran, read_text
from .installed import dist_version
from .rdma import rdma_devices, rdma_of, sys_text

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

NCCL_DISTS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
SMI_QUERY = ["nvidia-smi", "-q"]
DOCKER_DRIVER = ["docker", "info", "--format", "{{.Driver}}"]
DRIVER = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")
SMI_FIELD = re.compile(r"^\s*(Driver Version|CUDA(?: Driver)? Version)\s*:\s*(\S+)", re.M)


def parse_meminfo_cma(text: str) -> dict[str, int]:
    """CmaTotal and CmaFree of /proc/meminfo, in bytes (absent keys left out)."""
    found = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if key in ("CmaTotal", "CmaFree") and words and words[0].isdigit():
            found[key] = int(words[0]) * 1024
    return found


def parse_driver_version(text: str) -> str | None:
    """The driver release in /proc/driver/nvidia/version (`... Kernel Module for aarch64  580.95.05 ...`)."""
    found = DRIVER.search(text)
    return found.group(1) if found else None


def parse_smi_versions(text: str) -> dict[str, str]:
    """The driver and CUDA versions from the header of `nvidia-smi -q`."""
    out = {}
    for label, value in SMI_FIELD.findall(text):
        out["driver" if label.startswith("Driver") else "cuda"] = value
    return out


def nvidia_versions(proc: str, smi_text: str | None) -> dict[str, str | None]:
    """The NVIDIA driver (the kernel module's own word first) and the CUDA version it supports."""
    smi = parse_smi_versions(smi_text or "")
    module = parse_driver_version(read_text(os.path.join(proc, "driver", "nvidia", "version")) or "")
    return {"driver": module or smi.get("driver"), "cuda": smi.get("cuda")}


def smi_query() -> str | None:
    """`nvidia-smi -q`, or None where there is no NVIDIA driver."""
    try:
        done = ran(SMI_QUERY, 20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def link(sys_root: str, interface: str) -> dict[str, Any]:
    """The interface's operational state, speed (Mb/s; None when down or not reported) and MTU."""
    base = os.path.join(sys_root, "class", "net", interface)
    speed = sys_text(base, "speed")
    mtu = sys_text(base, "mtu")
    return {
        "state": sys_text(base, "operstate"),
        "speed": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
        "mtu": int(mtu) if mtu and mtu.isdigit() else None,
    }


def hcas(sys_root: str, interface: str, listed: list[str]) -> list[dict[str, Any]]:
    """The spec's RDMA devices and those of the interface's port (its own, then twins), each once."""
    devices = rdma_devices(sys_root)
    port = {d["device"]: d for d in rdma_of(interface, devices)}
    out = []
    for name in [*listed, *[n for n in port if n not in listed]]:
        found = port.get(name) or _device(name, devices)
        out.append({"device": name, "listed": name in listed, "present": found is not None, **(found or {})})
    return out


def _device(name: str, devices: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A listed device that is not behind the interface: its first port, as rdma_of shows one."""
    for dev in devices:
        if dev["device"] == name:
            port = dev["ports"][0] if dev["ports"] else {}
            keep = ("state", "link_layer", "rate")
            return {"via": "elsewhere", "fw_ver": dev["fw_ver"], **{k: port.get(k) for k in keep}}
    return None


def firmware(devices: list[dict[str, Any]], interface: str) -> str | None:
    """The NIC's firmware: its RDMA device's fw_ver, or what `ethtool -i` reports."""
    for dev in devices:
        if dev.get("fw_ver"):
            return str(dev["fw_ver"])
    try:
        done = subprocess.run(
            ["ethtool", "-i", interface], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"^firmware-version:\s*(.+)$", done.stdout, re.M)
    value = found.group(1).strip() if found else ""
    return value if value and value.upper() != "N/A" else None


def bios(sys_root: str) -> str | None:
    """The BIOS version and date as DMI reports them."""
    version = sys_text(sys_root, "class", "dmi", "id", "bios_version")
    date = sys_text(sys_root, "class", "dmi", "id", "bios_date")
    return " ".join(x for x in (version, date and f"({date})") if x) or None


def nccl_version(site: str | None) -> str | None:
    """The NCCL wheel of the venv (what torch loads), read without importing anything."""
    for name in NCCL_DISTS if site else ():
        found = dist_version(str(site), name)
        if found:
            return found
    return None


def storage_driver() -> str | None:
    """The Docker engine's storage driver (overlay2, ...), or None without docker."""
    try:
        done = ran(DOCKER_DRIVER, 60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    driver = done.stdout.strip() if done.returncode == 0 else ""
    return driver or None


def open_files() -> list[int]:
    """The open-file limit of this session (what a process started from it gets): [soft, hard]."""
    import resource

    return list(resource.getrlimit(resource.RLIMIT_NOFILE))


def host_details(
    request: dict[str, Any], site: str | None, sys_root: str = "/sys", proc_root: str = "/proc"
) -> dict[str, Any]:
    """Everything the host rows compare, read afresh."""
    interface = str(request.get("interface", ""))
    devices = hcas(sys_root, interface, list(request.get("hcas", [])))
    return {
        "kernel": sys_text(proc_root, "sys", "kernel", "osrelease"),
        "cmdline": sys_text(proc_root, "cmdline"),
        "cma": parse_meminfo_cma(read_text(os.path.join(proc_root, "meminfo")) or ""),
        "nvidia": nvidia_versions(proc_root, smi_query() if request.get("smi", True) else None),
        "link": link(sys_root, interface),
        "hcas": devices,
        "firmware": firmware(devices, interface),
        "bios": bios(sys_root),
        "nccl": nccl_version(site),
        "storage_driver": storage_driver() if request.get("docker") else None,
        "open_files": open_files(),
    }
