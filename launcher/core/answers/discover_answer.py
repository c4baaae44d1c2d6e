"""What `init` learns from a node (the discover script's answer), typed and checked. Pure."""

from __future__ import annotations

from typing import Any, TypedDict

from launcher.core.answers.facts_answer import HostFacts, VllmFacts, host, vllm
from launcher.core.answers.read import MAX_BYTES, At, Refused, strings
from launcher.core.answers.run_answer import failed

MAX_INTERFACES = 1024


class Address(TypedDict):
    """One address of an interface."""

    address: str
    prefix: int
    family: str
    scope: str | None


class RdmaPort(TypedDict):
    """An RDMA device behind an interface (its own, or its twin on the other PCIe link)."""

    device: str
    via: str
    pci: str | None
    state: str | None
    link_layer: str | None
    rate: str | None


class Interface(TypedDict):
    """A network interface: state, speed (Mb/s), MTU, PCI function, addresses, RDMA devices."""

    name: str
    state: str | None
    loopback: bool
    speed: int | None
    mtu: int | None
    pci: str | None
    addresses: list[Address]
    rdma: list[RdmaPort]


class ModelCheck(TypedDict, total=False):
    """A model directory: present, its config, tokenizer, weights, shards an index names."""

    path: str
    exists: bool
    config: dict[str, Any] | None
    tokenizer: list[str]
    weights: int
    weight_bytes: int
    missing_shards: list[str]


class Discovered(TypedDict, total=False):
    """Everything `init` asks of one node."""

    hostname: str
    boot_id: str | None
    python: str
    ssh_address: str | None
    interfaces: list[Interface]
    host: HostFacts
    vllm: VllmFacts
    venvs_found: list[VllmFacts]
    model: ModelCheck
    models_found: list[ModelCheck]


def discovered(raw: object) -> Discovered:
    """The discover script's answer."""
    at = At(raw)
    error = failed(at)
    if error is not None:
        raise Refused(error)
    out = Discovered(
        hostname=at.field("hostname").name(),
        boot_id=at.maybe("boot_id", At.name),
        python=at.field("python").name(32),
        ssh_address=at.maybe("ssh_address", At.name),
        interfaces=[_interface(i) for i in at.field("interfaces").items(MAX_INTERFACES)],
        host=host(at.field("host")),
    )
    if at.get("vllm") is not None:
        out["vllm"] = vllm(at.field("vllm"))
    if at.get("venvs_found") is not None:
        out["venvs_found"] = [vllm(v) for v in at.field("venvs_found").items(256)]
    if at.get("model") is not None:
        out["model"] = model_check(at.field("model"))
    if at.get("models_found") is not None:
        out["models_found"] = [model_check(m) for m in at.field("models_found").items(10_000)]
    return out


def _interface(at: At) -> Interface:
    return Interface(
        name=at.field("name").name(64),
        state=at.maybe("state", At.name),
        loopback=at.field("loopback").flag(),
        speed=at.maybe("speed", lambda a: a.integer(0, 10_000_000)),
        mtu=at.maybe("mtu", lambda a: a.integer(0, 1 << 20)),
        pci=at.maybe("pci", At.name),
        addresses=[_address(a) for a in at.field("addresses").items(1024)],
        rdma=[_rdma(r) for r in at.field("rdma").items(64)],
    )


def _address(at: At) -> Address:
    return Address(
        address=at.field("address").name(64),
        prefix=at.field("prefix").integer(0, 128),
        family=at.field("family").one_of("inet", "inet6"),
        scope=at.maybe("scope", At.name),
    )


def _rdma(at: At) -> RdmaPort:
    return RdmaPort(
        device=at.field("device").name(64),
        via=at.field("via").one_of("netdev", "twin"),
        pci=at.maybe("pci", At.name),
        state=at.maybe("state", At.name),
        link_layer=at.maybe("link_layer", At.name),
        rate=at.maybe("rate", At.name),
    )


def model_check(at: At) -> ModelCheck:
    """A model directory as discover saw it."""
    out = ModelCheck(path=at.field("path").absolute(), exists=at.field("exists").flag())
    if at.get("config") is not None:
        at.field("config").fields()
        out["config"] = at.field("config").json()
    elif "config" in at.fields():
        out["config"] = None
    if at.get("tokenizer") is not None:
        out["tokenizer"] = list(strings(at.field("tokenizer"), At.relative, 64))
    if at.get("weights") is not None:
        out["weights"] = at.field("weights").integer(0, 1_000_000)
    if at.get("weight_bytes") is not None:
        out["weight_bytes"] = at.field("weight_bytes").integer(0, MAX_BYTES)
    if at.get("missing_shards") is not None:
        out["missing_shards"] = list(strings(at.field("missing_shards"), At.relative, 100_000))
    return out
