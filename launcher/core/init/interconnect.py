"""Which interface and address carry the traffic between the nodes. Pure.

From each node's interfaces (as `discover` reports them) to the candidate links: an IPv4
address of the head and, on every worker, an interface in the same subnet. Each candidate
is then tried for real (a TCP connection from every worker to the head's address); the
chosen one is reachable, RDMA-capable if any is, the fastest, and not the network SSH
arrives on when another is as good. Every decision carries its reason for the spec's comments.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Interfaces that never carry traffic to another machine: container and VM bridges, veths.
LOCAL_ONLY = ("docker", "br-", "virbr", "veth", "cni", "flannel", "cali", "lxc", "podman")


@dataclass(frozen=True, slots=True)
class Link:
    """One IPv4 address of one interface of one node, with what makes it a good fabric."""

    node: str
    interface: str
    address: str
    prefix: int
    speed: int | None  # Mb/s; None when the link does not say
    rdma: tuple[str, ...]  # the port's active RDMA devices, twins included: NCCL_IB_HCA
    rdma_down: tuple[str, ...]  # RDMA devices of the port that are not active
    ssh: bool  # SSH to the node arrives on this address (the management network, usually)
    primary: bool  # False for the second PCIe link of a port (its twin holds the first)

    @property
    def network(self) -> ipaddress.IPv4Network:
        """The subnet the address is in."""
        return ipaddress.IPv4Network(f"{self.address}/{self.prefix}", strict=False)

    def pairs_with(self, other: Link) -> bool:
        """True when both addresses sit in one subnet (each in the other's network)."""
        mine, theirs = ipaddress.IPv4Address(self.address), ipaddress.IPv4Address(other.address)
        return theirs in self.network and mine in other.network and self.address != other.address

    def describe(self) -> str:
        """`enp1s0f1np1 10.0.0.1/24, 200 Gb/s, RDMA rocep1s0f1+roceP2p1s0f1`, for comments."""
        words = [f"{self.interface} {self.address}/{self.prefix}", speed_text(self.speed)]
        words.append("RDMA " + "+".join(self.rdma) if self.rdma else "no RDMA")
        if self.ssh:
            words.append("SSH arrives here")
        return ", ".join(words)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A head address and, for every worker, its interface in the same subnet."""

    links: tuple[Link, ...]  # rank order: the head first

    @property
    def head(self) -> Link:
        """The head's side: its address is --master-addr."""
        return self.links[0]

    @property
    def rdma(self) -> bool:
        """True when every node's interface has an active RDMA device."""
        return all(link.rdma for link in self.links)

    @property
    def speed(self) -> int:
        """The slowest node's link speed (Mb/s; 0 when unknown)."""
        return min(link.speed or 0 for link in self.links)

    @property
    def label(self) -> str:
        """`10.0.0.0/24 (enp1s0f1np1 on every node)` or with each node's name when they differ."""
        names = {link.interface for link in self.links}
        where = (
            f"{next(iter(names))} on every node"
            if len(names) == 1
            else ", ".join(f"{link.interface} on {link.node}" for link in self.links)
        )
        return f"{self.head.network} ({where})"


@dataclass(frozen=True, slots=True)
class Choice:
    """The chosen candidate (None when none works), why, and every other interface and why not."""

    chosen: Candidate | None
    why: tuple[str, ...]
    others: tuple[str, ...]


def speed_text(speed: int | None) -> str:
    """Mb/s as people say it: 200 Gb/s, 10 Gb/s, 100 Mb/s, or 'speed unknown'."""
    if not speed:
        return "speed unknown"
    return f"{speed // 1000} Gb/s" if speed >= 1000 and speed % 1000 == 0 else f"{speed} Mb/s"


def node_links(node: str, facts: Mapping[str, Any]) -> tuple[list[Link], list[str]]:
    """A node's usable links, and a line for each interface left out (and why)."""
    links: list[Link] = []
    ignored: list[str] = []
    ssh_address = facts.get("ssh_address")
    for iface in facts.get("interfaces", []):
        name = str(iface.get("name"))
        v4 = [a for a in iface.get("addresses", []) if a.get("family") == "inet"]
        why_not = _left_out(iface, name, v4)
        if why_not:
            if not iface.get("loopback"):
                ignored.append(f"{name} on {node}: {why_not}")
            continue
        active = [r for r in iface.get("rdma", []) if r.get("state") in ("ACTIVE", None)]
        down = [str(r["device"]) for r in iface.get("rdma", []) if r not in active]
        domains = [str(r.get("pci") or "")[:4] for r in active]
        own = str(iface.get("pci") or "")[:4]
        for addr in v4:
            links.append(
                Link(
                    node,
                    name,
                    str(addr["address"]),
                    int(addr["prefix"]),
                    iface.get("speed") or _rate(active),
                    tuple(str(r["device"]) for r in active),
                    tuple(down),
                    addr["address"] == ssh_address,
                    not own or not domains or own <= min(domains),
                )
            )
    return links, ignored


def _left_out(iface: Mapping[str, Any], name: str, v4: list[Any]) -> str | None:
    if iface.get("loopback"):
        return "loopback"
    if name.startswith(LOCAL_ONLY):
        return "a container or VM bridge (never reaches another machine)"
    if iface.get("state") not in ("up", "unknown"):
        return f"link {iface.get('state') or 'state unknown'}"
    if not v4:
        return "no IPv4 address"
    return None


def _rate(rdma: list[Mapping[str, Any]]) -> int | None:
    """Mb/s from an RDMA port's rate ('200 Gb/sec (4X HDR)') when the netdev gives no speed."""
    for dev in rdma:
        words = str(dev.get("rate") or "").split()
        if len(words) >= 2 and words[1].startswith("Gb") and words[0].replace(".", "").isdigit():
            return int(float(words[0]) * 1000)
    return None


def candidates(links: Mapping[str, list[Link]], order: list[str]) -> tuple[list[Candidate], list[str]]:
    """Every head address with a partner on each worker; a line for each address without one."""
    head, workers = order[0], order[1:]
    found, alone = [], []
    for link in links.get(head, []):
        partners = {
            w: sorted((x for x in links.get(w, []) if link.pairs_with(x)), key=_best) for w in workers
        }
        missing = [w for w, p in partners.items() if not p]
        if missing:
            alone.append(
                f"{link.interface} {link.network} on {head}: no address in it on {', '.join(missing)}"
            )
            continue
        found.append(Candidate((link, *(partners[w][0] for w in workers))))
    heads = {link.network for link in links.get(head, [])}
    for worker in workers:
        for link in links.get(worker, []):
            if not any(link.pairs_with(h) for h in links.get(head, [])) and link.network not in heads:
                alone.append(f"{link.interface} {link.network} on {worker}: {head} has no address in it")
    return found, alone


def _best(link: Link) -> tuple[Any, ...]:
    """Within one node: RDMA first, then faster, then the port's primary link, then by name."""
    return (not link.rdma, -(link.speed or 0), not link.primary, link.ssh, link.interface)


def rank(candidate: Candidate, reach: Mapping[str, str]) -> tuple[Any, ...]:
    """Sort key, best first: reachable, RDMA, speed, not the SSH network, primary link, name."""
    reachable = all(v == "yes" for v in reach.values())
    return (
        not reachable,
        not candidate.rdma,
        -candidate.speed,
        candidate.head.ssh,
        not all(link.primary for link in candidate.links),
        candidate.head.interface,
        candidate.head.address,
    )


def choose(found: list[Candidate], reach: Mapping[str, Mapping[str, str]], alone: list[str]) -> Choice:
    """The best reachable candidate, why it won, and why each other one did not."""
    ordered = sorted(found, key=lambda c: rank(c, reach.get(c.head.address, {})))
    best = ordered[0] if ordered else None
    best_reach = reach.get(best.head.address, {}) if best else {}
    if best is None or any(v != "yes" for v in best_reach.values()):
        others = tuple(_other(c, reach.get(c.head.address, {}), None) for c in ordered) + tuple(alone)
        problem = "no candidate link reaches every worker" if ordered else "no subnet is shared by every node"
        return Choice(None, (problem,), others)
    if best_reach:
        first = f"{best.label}: every worker reached {best.head.node}'s {best.head.address} over TCP"
    else:
        first = f"{best.label}: the only node, no peer to reach"
    why = [
        first,
        ("RDMA on every node" if best.rdma else "no RDMA device behind it")
        + f", {speed_text(best.speed)} (the slowest node's link)",
    ]
    tie = [c for c in ordered[1:] if rank(c, reach.get(c.head.address, {}))[:5] == rank(best, best_reach)[:5]]
    if tie:
        why.append(f"as good as {tie[0].label} on every count: taken by name; either works")
    others = tuple(_other(c, reach.get(c.head.address, {}), best) for c in ordered[1:]) + tuple(alone)
    return Choice(best, tuple(why), others)


def _other(candidate: Candidate, reach: Mapping[str, str], best: Candidate | None) -> str:
    """One line for a candidate that was not chosen, saying why."""
    failed = {w: v for w, v in reach.items() if v != "yes"}
    if failed:
        detail = "; ".join(f"{w}: {v}" for w, v in failed.items())
        return f"{candidate.label}: NOT reachable ({detail})"
    reasons = []
    if best is not None and best.rdma and not candidate.rdma:
        reasons.append("no RDMA")
    if best is not None and candidate.speed < best.speed:
        reasons.append(f"slower ({speed_text(candidate.speed)})")
    if candidate.head.ssh:
        reasons.append("the network SSH arrives on")
    return f"{candidate.label}: reachable, " + (", ".join(reasons) or "second by name")
