"""The host details of the facts answer (hostinfo.host_details), read strictly. Pure.

The kernel and its command line, the CMA counters, the NVIDIA driver, the fabric link, the
RDMA devices of its port, firmware, BIOS, NCCL, the storage driver and the open-file limit,
each value checked; what the host rows read, typed.
"""

from __future__ import annotations

from typing import TypedDict

from launcher.core.answers.read import MAX_BYTES, MAX_PATH, At

MAX_RLIMIT = (1 << 63) - 1
MAX_SPEED = 10_000_000  # Mb/s: 10 Tb/s
MAX_MTU = 1 << 20
MAX_DEVICES = 256


class Nvidia(TypedDict):
    """The NVIDIA driver release and the highest CUDA it runs (None: no driver)."""

    driver: str | None
    cuda: str | None


class Link(TypedDict):
    """The fabric interface's operational state, speed (Mb/s) and MTU (None: not reported)."""

    state: str | None
    speed: int | None
    mtu: int | None


class Hca(TypedDict, total=False):
    """One RDMA device of the spec's `hca` or of the interface's port."""

    device: str
    listed: bool
    present: bool
    via: str | None
    state: str | None
    link_layer: str | None
    rate: str | None
    fw_ver: str | None


class HostDetails(TypedDict):
    """Everything the host rows compare of one node."""

    kernel: str | None
    cmdline: str | None
    cma: dict[str, int]
    nvidia: Nvidia
    link: Link
    hcas: list[Hca]
    firmware: str | None
    bios: str | None
    nccl: str | None
    storage_driver: str | None
    open_files: list[int]


def _word(at: At) -> str:
    return at.name(128)


def host_details(at: At) -> HostDetails:
    """The host_details part of the facts answer."""
    nvidia, link = at.field("nvidia"), at.field("link")
    cma = at.field("cma").entries(At.name, 16)
    return HostDetails(
        kernel=at.maybe("kernel", _word),
        cmdline=at.maybe("cmdline", lambda a: a.text(MAX_PATH)),
        cma={k: v.integer(0, MAX_BYTES) for k, v in cma.items()},
        nvidia=Nvidia(driver=nvidia.maybe("driver", _word), cuda=nvidia.maybe("cuda", _word)),
        link=Link(
            state=link.maybe("state", _word),
            speed=link.maybe("speed", lambda a: a.integer(0, MAX_SPEED)),
            mtu=link.maybe("mtu", lambda a: a.integer(0, MAX_MTU)),
        ),
        hcas=[_hca(h) for h in at.field("hcas").items(MAX_DEVICES)],
        firmware=at.maybe("firmware", _word),
        bios=at.maybe("bios", At.name),
        nccl=at.maybe("nccl", _word),
        storage_driver=at.maybe("storage_driver", _word),
        open_files=[x.integer(-1, MAX_RLIMIT) for x in at.field("open_files").items(2)],
    )


def _hca(at: At) -> Hca:
    """One RDMA device: its name and whether listed and present, then what its port reports."""
    return Hca(
        device=at.field("device").name(),
        listed=at.field("listed").flag(),
        present=at.field("present").flag(),
        via=at.maybe("via", _word),
        state=at.maybe("state", _word),
        link_layer=at.maybe("link_layer", _word),
        rate=at.maybe("rate", _word),
        fw_ver=at.maybe("fw_ver", _word),
    )
