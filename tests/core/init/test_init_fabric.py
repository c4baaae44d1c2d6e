"""How `init` picks the link between the nodes: only one that really connects, RDMA first,
then the fastest, not the SSH network when another is as good; per-node interface names."""

from __future__ import annotations

from typing import Any

from launcher.core.init.interconnect import Choice, candidates, choose, node_links
from tests.init_facts import bed_pair, iface, node, spark_pair


def decide(facts: dict[str, dict[str, Any]], reach: dict[str, dict[str, str]] | None = None) -> Choice:
    """The choice for these facts; every candidate reachable unless `reach` says otherwise."""
    links = {n: node_links(n, f)[0] for n, f in facts.items()}
    ignored = [line for n, f in facts.items() for line in node_links(n, f)[1]]
    found, alone = candidates(links, list(facts))
    workers = list(facts)[1:]
    tried = {c.head.address: dict.fromkeys(workers, "yes") for c in found}
    tried.update(reach or {})
    return choose(found, tried, alone + ignored)


def picked(choice: Choice) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    assert choice.chosen is not None, choice
    return {link.node: (link.interface, link.address, link.rdma) for link in choice.chosen.links}


def test_two_sparks_use_the_roce_port_with_both_twins_not_the_lan() -> None:
    choice = decide(spark_pair())
    assert picked(choice) == {
        "spark-1": ("enp1s0f1np1", "10.0.0.1", ("rocep1s0f1", "roceP2p1s0f1")),
        "spark-2": ("enp1s0f1np1", "10.0.0.2", ("rocep1s0f1", "roceP2p1s0f1")),
    }
    assert "RDMA on every node, 200 Gb/s" in choice.why[1]
    assert "every worker reached spark-1's 10.0.0.1 over TCP" in choice.why[0]
    others = "\n".join(choice.others)
    assert "192.168.1.0/24 (enP7s7 on every node): reachable, no RDMA, slower (10 Gb/s)" in others
    assert "enp1s0f0np0 on spark-1: link down" in others
    assert "docker0 on spark-1: a container or VM bridge" in others


def test_a_link_that_does_not_connect_is_never_chosen_however_fast() -> None:
    choice = decide(spark_pair(), {"10.0.0.1": {"spark-2": "No route to host"}})
    assert picked(choice)["spark-1"][0] == "enP7s7"
    assert (
        "10.0.0.0/24 (enp1s0f1np1 on every node): NOT reachable (spark-2: No route to host)" in choice.others
    )


def test_nothing_reachable_leaves_the_choice_to_the_user() -> None:
    choice = decide(bed_pair(), {"10.99.0.1": {"node2": "timed out"}})
    assert choice.chosen is None and choice.why == ("no candidate link reaches every worker",)
    assert any("NOT reachable (node2: timed out)" in line for line in choice.others)


def test_an_address_only_one_node_has_is_no_candidate() -> None:
    facts = bed_pair()
    facts["node2"]["interfaces"].append(iface("eth1", "10.98.0.2", speed=100000))
    choice = decide(facts)
    assert picked(choice)["node2"][0] == "eth0"
    assert "eth1 10.98.0.0/24 on node2: node1 has no address in it" in choice.others


def test_the_ssh_network_loses_a_tie_to_a_dedicated_link_named_differently_per_node() -> None:
    facts = bed_pair()
    facts["node1"]["interfaces"].append(iface("fab1", "10.97.0.1"))
    facts["node2"]["interfaces"].append(iface("fab2", "10.97.0.2"))
    choice = decide(facts)
    assert picked(choice) == {"node1": ("fab1", "10.97.0.1", ()), "node2": ("fab2", "10.97.0.2", ())}
    assert choice.chosen is not None and "fab1 on node1, fab2 on node2" in choice.chosen.label
    assert "10.99.0.0/24 (eth0 on every node): reachable, the network SSH arrives on" in choice.others


def test_a_full_tie_is_taken_by_name_and_said() -> None:
    facts = bed_pair()
    for i in (1, 2):
        facts[f"node{i}"]["interfaces"] += [iface("ib0", f"10.97.0.{i}"), iface("ib1", f"10.96.0.{i}")]
    choice = decide(facts)
    assert picked(choice)["node1"][0] == "ib0"
    assert any("as good as 10.96.0.0/24 (ib1 on every node)" in line for line in choice.why)


def test_rdma_beats_speed_and_a_down_or_unaddressed_link_is_left_out() -> None:
    facts = bed_pair()
    for i in (1, 2):
        facts[f"node{i}"]["interfaces"] += [
            iface("roce0", f"10.97.0.{i}", speed=25000, rdma=(f"mlx5_{i}",)),
            iface("fast0", f"10.96.0.{i}", speed=400000),
            iface("down0", f"10.95.0.{i}", state="down"),
            iface("bare0"),
        ]
    choice = decide(facts)
    assert picked(choice)["node1"] == ("roce0", "10.97.0.1", ("mlx5_1",))
    assert "down0 on node1: link down" in choice.others and "bare0 on node1: no IPv4 address" in choice.others


def test_a_single_node_needs_no_peer() -> None:
    facts = {"solo": node([iface("eth0", "10.1.0.5")], "10.1.0.5")}
    choice = decide(facts)
    assert picked(choice) == {"solo": ("eth0", "10.1.0.5", ())}
    assert "the only node, no peer to reach" in choice.why[0]


def test_link_local_addresses_as_nvidias_netplan_gives_them_pair_up() -> None:
    facts = bed_pair()
    facts["node1"]["interfaces"].append(iface("cx0", "169.254.10.1/16", speed=200000, rdma=("r0",)))
    facts["node2"]["interfaces"].append(iface("cx0", "169.254.20.2/16", speed=200000, rdma=("r0",)))
    assert picked(decide(facts))["node2"] == ("cx0", "169.254.20.2", ("r0",))
