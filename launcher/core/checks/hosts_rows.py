"""Rows of the hosts: kernel, NVIDIA driver, GPUs, NCCL, BIOS, NIC firmware, open files, py-spy
for evidence, and the fabric's link and RDMA devices. Pure.

Every row says, in its hint, whether a difference blocks a start (level `fail`) or is only
reported (`warn`), and why. What blocks is what makes the ranks fail or hang together: the
fabric MTU (RoCE runs at the path MTU; ranks on different MTUs stall on the first large
message), a link or RDMA port that is down, RDMA link layers that differ, a different NCCL
release, a different GPU model (vLLM picks kernels and the attention backend per GPU, and the
hybrid block size follows the backend). The rest is reported: nodes that differ there still
work together, and the versions known to break are rows of the regression table
(`checks.regressions`). vLLM's Python and torch are compared with the install (`checks.install`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.checks.check_report import Row, same
from launcher.core.spec.sections import Spec

REPORTED = "reported, not blocking: "
PY_SPY_HINT = (
    "without py-spy a rank that dies or wedges leaves only its log, no Python stacks: install it on "
    "every node (`VENV/bin/pip install py-spy`, or on PATH); reading a process is reading all its "
    "memory (keys, prompts), so py-spy reads this user's own processes under ptrace_scope 0, and "
    "any other only through `sudo -n` with a sudoers line for a root-owned py-spy's `dump` alone "
    "(deploy/upgrading-safely.md); never a file capability (setcap), which gives every user that right"
)


@dataclass(frozen=True, slots=True)
class HostFact:
    """One compared fact: how to read it from a node's facts, whether a difference blocks, and why."""

    item: str
    read: Callable[[Mapping[str, Any]], Any]
    level: str
    why: str


def _details(facts: Mapping[str, Any]) -> Mapping[str, Any]:
    found: Mapping[str, Any] = facts.get("host_details") or {}
    return found


def _gpus(facts: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = (facts.get("memory") or {}).get("gpus") or []
    return found


def _gib(size: Any) -> str:
    return "unified (system memory)" if size is None else f"{size / (1 << 30):.1f} GiB"


FACTS = (
    HostFact(
        "kernel",
        lambda f: _details(f).get("kernel"),
        "warn",
        REPORTED + "ranks on different kernels work together; a kernel known to break them is "
        "named by the regression rows",
    ),
    HostFact(
        "nvidia driver",
        lambda f: (_details(f).get("nvidia") or {}).get("driver") or "none",
        "warn",
        REPORTED + "each rank needs only a driver that runs its CUDA; a driver series known to "
        "break is named by the regression rows",
    ),
    HostFact(
        "cuda (driver)",
        lambda f: (_details(f).get("nvidia") or {}).get("cuda") or "none",
        "warn",
        REPORTED + "the highest CUDA each driver runs; vLLM's own CUDA libraries come with its install",
    ),
    HostFact(
        "gpu",
        lambda f: ", ".join(str(g.get("name")) for g in _gpus(f)) or "none",
        "fail",
        "vLLM picks kernels and the attention backend per GPU model, and a hybrid model's block "
        "size follows the backend: ranks on different GPUs build different KV-cache specs; pair "
        "nodes with the same GPU",
    ),
    HostFact(
        "gpu memory",
        lambda f: ", ".join(_gib(g.get("total")) for g in _gpus(f)) or "none",
        "warn",
        REPORTED + "the memory rows weigh each node's memory against the plan",
    ),
    HostFact(
        "nccl",
        lambda f: _details(f).get("nccl") or "none",
        "fail",
        "NCCL must be the same release on every rank (its wire protocol changes between "
        "releases): install the same torch and nvidia-nccl wheels in every node's venv",
    ),
    HostFact(
        "bios",
        lambda f: _details(f).get("bios") or "not reported",
        "warn",
        REPORTED
        + "firmware is worth keeping alike (update both boxes together), but it does not stop the ranks",
    ),
    HostFact(
        "nic firmware",
        lambda f: _details(f).get("firmware") or "not reported",
        "warn",
        REPORTED + "a ConnectX-7 firmware difference does not stop NCCL; update both together",
    ),
    HostFact(
        "open files (soft, hard)",
        lambda f: "/".join(map(str, _details(f).get("open_files") or [])) or "not reported",
        "warn",
        REPORTED + "vLLM raises its soft limit up to the hard one by itself",
    ),
)


def host_rows(spec: Spec, facts: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """The host facts compared across the nodes, then the fabric's link and RDMA devices."""
    rows = [
        same("host", f.item, {n: f.read(x) for n, x in facts.items()}, f.why, level=f.level) for f in FACTS
    ]
    if spec.vllm.runtime == "docker":
        rows.append(
            same(
                "host",
                "docker storage driver",
                {n: _details(x).get("storage_driver") or "not reported" for n, x in facts.items()},
                REPORTED + "images are compared by id; the storage driver only changes how layers are kept",
                level="warn",
            )
        )
    tools = {n: f.get("tools") for n, f in facts.items()}
    if all(tools.values()):
        rows.append(_py_spy_row({n: t for n, t in tools.items() if t}))
    return rows + link_rows(spec, facts) + hca_rows(spec, facts)


def _py_spy_row(tools: Mapping[str, dict[str, Any]]) -> Row:
    """Where py-spy is on each node and under which right it reads our processes (warns)."""
    values = {
        n: f"{t['py_spy']} ({t.get('ptrace')})" if t.get("py_spy") else "missing" for n, t in tools.items()
    }
    ok = all(t.get("py_spy") and t.get("ptrace_ok") for t in tools.values())
    return Row("host", "py-spy (stacks on a failure)", values, ok, None if ok else PY_SPY_HINT, "warn")


def link_rows(spec: Spec, facts: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """The spec's interface on every node: up, its speed, and above all its MTU."""
    interface = {n.name: n.interface for n in spec.nodes}
    link = {n: _details(x).get("link") or {} for n, x in facts.items()}
    names = "/".join(sorted(set(interface.values())))
    return [
        _judged(
            "network",
            f"{names} link up",
            {n: (link[n].get("state") in ("up", "unknown"), link[n].get("state") or "missing") for n in link},
            "bring the fabric interface up on that node (ip link set IFACE up); vLLM's ranks cannot "
            "reach each other over a link that is down",
        ),
        same(
            "network",
            f"{names} speed (Mb/s)",
            {n: link[n].get("speed") or "not reported" for n in link},
            REPORTED + "the slower link sets the pace of every collective, it does not stop them; "
            "check the cable and the port",
            level="warn",
        ),
        same(
            "network",
            f"{names} mtu",
            {n: link[n].get("mtu") or "missing" for n in link},
            "set the same MTU on the fabric interface of every node (ip link set IFACE mtu N, and in "
            "netplan): RoCE runs at the path MTU, and ranks with different MTUs stall or drop the large "
            "messages of the first collective",
        ),
    ]


def hca_rows(spec: Spec, facts: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """Every RDMA device the spec lists (NCCL_IB_HCA), and the port's twins it leaves out."""
    if not any(n.hca for n in spec.nodes):
        return []
    devices = {n: _details(x).get("hcas") or [] for n, x in facts.items()}
    listed = {n: [d for d in devs if d.get("listed")] for n, devs in devices.items()}
    return [
        _judged(
            "network",
            "hca ports active",
            {n: _states(devs) for n, devs in listed.items()},
            "every device in the node's `hca` must exist with its port ACTIVE (ibdev2netdev, rdma link): "
            "NCCL fails on a listed device it cannot use",
        ),
        same(
            "network",
            "hca link layer",
            {n: sorted({str(d.get("link_layer")) for d in devs}) for n, devs in listed.items()},
            "the RDMA devices must speak the same link layer on every node (Ethernet for RoCE)",
        ),
        same(
            "network",
            "hca rate",
            {n: sorted({str(d.get("rate")) for d in devs}) for n, devs in listed.items()},
            REPORTED + "the slower port sets the pace; check the cable",
            level="warn",
        ),
        _judged(
            "network",
            "hca twins listed",
            {n: _twins(devs) for n, devs in devices.items()},
            REPORTED + "NCCL uses only the devices in NCCL_IB_HCA: a DGX Spark port is two RoCE devices "
            "(one per PCIe link), and leaving one out halves the port's bandwidth; list both in `hca`",
            level="warn",
        ),
    ]


def _judged(
    area: str, item: str, judged: Mapping[str, tuple[bool, str]], hint: str, level: str = "fail"
) -> Row:
    """A row whose every node's value comes with its own verdict."""
    ok = all(good for good, _ in judged.values())
    return Row(area, item, {n: text for n, (_, text) in judged.items()}, ok, None if ok else hint, level)


def _states(devices: list[Mapping[str, Any]]) -> tuple[bool, str]:
    """Every listed device present with its port ACTIVE, and 'dev STATE, ...'."""
    text = ", ".join(f"{d['device']} {d.get('state') or 'missing'}" for d in devices)
    return all(d.get("present") and d.get("state") == "ACTIVE" for d in devices), text


def _twins(devices: list[Mapping[str, Any]]) -> tuple[bool, str]:
    """Every RDMA device of the interface's port is listed (NCCL uses only those)."""
    left_out = [str(d["device"]) for d in devices if not d.get("listed")]
    return not left_out, f"{', '.join(left_out)} not listed" if left_out else "yes"
