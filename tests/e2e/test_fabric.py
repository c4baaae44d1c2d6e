"""The hosts and the fabric proven alike on the real test bed, before any vLLM starts.

node2's interface gets another MTU, or a firewall that drops every inbound TCP connection but
SSH's (what a worker with a default-deny firewall does): `check` fails naming the MTU, or the
connection vLLM's head opens into node2's message queue, within a minute; `up` refuses the
same way and starts nothing. Each change is undone in a finalizer; the clean bed passes, with
the all-reduce's latency and bandwidth. No vLLM pair is started: these tests are quick.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import DEMO, NAMESPACES, cli, marked_processes

pytestmark = pytest.mark.testbed

NODE2 = NAMESPACES["node2"]
# What a default-deny firewall keeps: replies to what the node opened itself, and SSH.
FIREWALL = (
    ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
    ["-p", "tcp", "--dport", "22", "-j", "ACCEPT"],
    ["-p", "tcp", "-j", "DROP"],
)


def in_node2(*argv: str) -> str:
    done = subprocess.run(["ip", "netns", "exec", NODE2, *argv], capture_output=True, text=True, check=True)
    return done.stdout


@contextmanager
def node2_mtu(mtu: int) -> Iterator[None]:
    """node2's eth0 at another MTU, put back after."""
    before = json.loads(
        subprocess.run(
            ["ip", "-n", NODE2, "-j", "link", "show", "eth0"], capture_output=True, text=True, check=True
        ).stdout
    )[0]["mtu"]
    subprocess.run(["ip", "-n", NODE2, "link", "set", "eth0", "mtu", str(mtu)], check=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "-n", NODE2, "link", "set", "eth0", "mtu", str(before)], check=True)


@contextmanager
def node2_drops_inbound_tcp_but_ssh() -> Iterator[None]:
    """node2's INPUT chain as a default-deny firewall has it; exactly these rules removed after."""
    added = []
    try:
        for rule in FIREWALL:
            in_node2("iptables", "-A", "INPUT", *rule)
            added.append(rule)
        yield
    finally:
        for rule in reversed(added):
            in_node2("iptables", "-D", "INPUT", *rule)


def check(*args: str) -> tuple[int, dict[str, Any], float]:
    began = time.monotonic()
    done = cli("check", DEMO, "--json", "--no-probe", *args, timeout=300)
    return done.returncode, json.loads(done.stdout), time.monotonic() - began


def rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["item"]: r for r in report["rows"]}


def failing(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in rows(report).items() if not r["ok"] and r["level"] == "fail"}


def vllm_started() -> list[str]:
    """Any vLLM process on the bed's nodes (in their network namespaces): `vllm serve` or VLLM::..."""
    bed = {os.stat(f"/run/netns/{ns}").st_ino for ns in NAMESPACES.values()}
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if os.stat(entry / "ns" / "net").st_ino not in bed:
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            title = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if "vllm serve" in cmdline or title.startswith("VLLM"):
            found.append(f"{entry.name}: {cmdline[:120]}")
    return found


@pytest.fixture
def bed(testbed: Path) -> Iterator[None]:
    """The bed with no cluster running; nothing of vLLM left after the test."""
    cli("down", DEMO, "--grace", "5")
    yield
    assert marked_processes() == [] and vllm_started() == []


def test_the_clean_bed_passes_with_the_collectives_figures(bed: None) -> None:
    code, report, _ = check()
    assert code == 0, failing(report)
    found = rows(report)
    assert found["node1 -> node2 (worker queue)"]["values"] == {"node1": "ok"}
    assert found["node2 -> node1 (scheduler queue, gloo)"]["values"] == {"node2": "ok"}
    figures = found["gloo all-reduce (2 nodes)"]["values"]
    assert set(figures) == {"node1", "node2"} and all(
        " us, " in v and v.endswith(" GB/s") for v in figures.values()
    )
    assert found["known regressions"]["ok"] and found["eth0 mtu"]["values"] == {"node1": 1500, "node2": 1500}


def test_an_mtu_that_differs_fails_and_one_put_back_passes(bed: None) -> None:
    with node2_mtu(1400):
        code, report, _ = check("--no-collective")
    assert code == 3
    row = failing(report)["eth0 mtu"]
    assert row["values"] == {"node1": 1500, "node2": 1400} and "same MTU" in row["hint"]
    code, report, _ = check("--no-collective")  # read afresh: the MTU put back is seen put back
    assert code == 0, failing(report)


def test_a_worker_that_drops_inbound_tcp_is_refused_by_check_and_up_naming_it(bed: None) -> None:
    with node2_drops_inbound_tcp_but_ssh():
        code, report, took = check()
        began = time.monotonic()
        up = cli("up", DEMO, "--no-probe", "--timeout", "60", timeout=300)  # never hang: give up, stop all
        up_took = time.monotonic() - began
        started = vllm_started()
    assert code == 3 and took < 60, (code, took)
    row = failing(report)["node1 -> node2 (worker queue)"]
    assert row["values"] == {"node1": "timed out"} and "node2 must accept TCP from node1" in row["hint"]
    # node2's own connections into node1 held, and say so (the head kept its store until all read it)
    assert rows(report)["node2 -> node1 (scheduler queue, gloo)"]["values"] == {"node2": "ok"}
    assert rows(report)["node1:29501 reachable"]["ok"]  # the rendezvous alone passes: today's check did
    assert up.returncode == 3 and up_took < 60, (up.returncode, up_took, up.stderr[-2000:])
    assert "FAIL network  node1 -> node2 (worker queue)" in up.stderr and "nothing was started" in up.stderr
    assert started == [] and marked_processes() == []
