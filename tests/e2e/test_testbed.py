"""The two-node test bed itself: real namespaces, real sshd, strict host keys (needs root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed import forward

pytestmark = pytest.mark.testbed

REPO = Path(__file__).resolve().parents[2]
BED_DIR = Path(os.environ.get("SPARK_LAUNCH_TESTBED_DIR", "/tmp/spark-launch-testbed"))
NODES = {"node1": ("sl-node1", "10.99.0.1"), "node2": ("sl-node2", "10.99.0.2")}
PROBE, PROBE_VALUE = "SL_TESTBED_PROBE", "only-on-node2"
UP_ARGS = (
    "up",
    "--dir",
    str(BED_DIR),
    "--nodes",
    "2",
    "--node-env",
    f"node2:{PROBE}={PROBE_VALUE}",
)


def run_testbed(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m testbed ARGS` from the repo root, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "testbed", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def ssh(alias: str, command: str, *options: str) -> subprocess.CompletedProcess[str]:
    """Run a command on a node through the bed's ssh_config (strict host keys, batch mode)."""
    return subprocess.run(
        ["ssh", "-F", str(BED_DIR / "ssh_config"), *options, alias, command],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def bed_status() -> dict[str, Any]:
    """`python -m testbed status --json`, parsed."""
    out = run_testbed("status", "--dir", str(BED_DIR), "--json").stdout
    result: dict[str, Any] = json.loads(out)
    return result


def live_bed_sshds() -> list[int]:
    """Pids of non-zombie sshd processes started from a config under the bed dir."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if "sshd" in args and f"{BED_DIR}/node" in args and state != "Z":
            pids.append(int(entry.name))
    return pids


def bed_namespaces() -> list[str]:
    """The bed's network namespaces that exist now."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return sorted(line.split()[0] for line in out.stdout.splitlines() if line.startswith("sl-node"))


def bring_up() -> None:
    """Bring the bed up with the session's arguments, failing with its stderr."""
    result = run_testbed(*UP_ARGS)
    assert result.returncode == 0, f"testbed up failed:\n{result.stderr}"


@pytest.fixture(scope="session")
def bed(bed_lock: None) -> Iterator[dict[str, Any]]:
    """The bed, up for the whole session (which holds the bed's lock), and left at its end as
    this session found it: the machine has ONE bed, and the next session may want it up, with
    its engines, without this session's probe variable."""
    found = bed_status()
    bring_up()
    yield json.loads((BED_DIR / "testbed.json").read_text())
    restore_bed(found)


def restore_bed(found: dict[str, Any]) -> None:
    """The bed as `found`: down, or up as the other sessions bring it up (engines included)."""
    if not found["up"]:
        result = run_testbed("down", "--dir", str(BED_DIR))
    else:
        engines = ["--docker"] if any(n["dockerd_pid"] for n in found["nodes"]) else []
        result = run_testbed("up", "--dir", str(BED_DIR), *engines)
    assert result.returncode == 0, result.stderr


def test_up_is_idempotent(bed: dict[str, Any]) -> None:
    """A second `up` with the same arguments changes nothing: same sshds, same host keys."""
    before = bed_status()
    known_hosts = (BED_DIR / "known_hosts").read_bytes()
    bring_up()
    after = bed_status()
    assert after["up"] is True
    assert [n["sshd_pid"] for n in after["nodes"]] == [n["sshd_pid"] for n in before["nodes"]]
    assert (BED_DIR / "known_hosts").read_bytes() == known_hosts
    assert bed_namespaces() == ["sl-node1", "sl-node2"]
    assert json.loads((BED_DIR / "testbed.json").read_text()) == bed


def test_description_names_nodes_model_and_vllm(bed: dict[str, Any]) -> None:
    """testbed.json tells specs how to reach each node, the model and the vLLM binary."""
    nodes = {n["name"]: (n["namespace"], n["address"]) for n in bed["nodes"]}
    assert nodes == NODES
    assert all(n["interface"] == "eth0" and n["ssh_alias"] == n["name"] for n in bed["nodes"])
    assert Path(bed["ssh_config"]).is_file()
    assert (Path(bed["model"]) / "config.json").is_file()
    assert (Path(bed["model"]) / "tokenizer.json").is_file()
    assert os.access(bed["vllm"], os.X_OK)
    assert os.access(bed["py_spy"], os.X_OK)  # for the stacks of a failing rank


@pytest.mark.parametrize("alias", sorted(NODES))
def test_ssh_lands_in_the_nodes_namespace(bed: dict[str, Any], alias: str) -> None:
    """ssh to nodeI lands in sl-nodeI, whose eth0 carries 10.99.0.I."""
    namespace, address = NODES[alias]
    result = ssh(alias, "ip netns identify; ip -j -4 addr show eth0")
    assert result.returncode == 0, result.stderr
    identify, addr_json = result.stdout.split("\n", 1)
    assert identify == namespace
    addrs = [a["local"] for link in json.loads(addr_json) for a in link["addr_info"]]
    assert addrs == [address]


@pytest.mark.parametrize("alias", sorted(NODES))
def test_host_keys_are_checked_strictly(bed: dict[str, Any], alias: str, tmp_path: Path) -> None:
    """The config demands strict checking, and an unknown host key is refused."""
    options = ssh(alias, "true", "-G").stdout.splitlines()
    assert "stricthostkeychecking true" in options
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    result = ssh(alias, "true", "-o", f"UserKnownHostsFile={empty}")
    assert result.returncode == 255
    assert "Host key verification failed" in result.stderr


def test_nodes_reach_each_other(bed: dict[str, Any]) -> None:
    """node1 reaches node2's sshd over the bridge (vLLM's ranks talk the same way)."""
    result = ssh("node1", "exec 3<>/dev/tcp/10.99.0.2/22 && head -c 8 <&3")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "SSH-2.0-"


def test_node_env_is_visible_only_on_its_node(bed: dict[str, Any]) -> None:
    """A SetEnv variable given for node2 is in node2's sessions and not in node1's."""
    command = f"printenv {PROBE} || echo unset"
    assert ssh("node2", command).stdout.strip() == PROBE_VALUE
    assert ssh("node1", command).stdout.strip() == "unset"


def test_bind_mount_is_seen_on_one_node_only(bed: dict[str, Any], tmp_path: Path) -> None:
    """A file bind-mounted on node2 changes what node2 reads, not node1 or the host."""
    target = BED_DIR / "bind-probe.txt"
    target.write_text("original\n")
    other = tmp_path / "other.txt"
    other.write_text("node2's own\n")
    bind = run_testbed("bind", "--dir", str(BED_DIR), "node2", str(other), str(target))
    assert bind.returncode == 0, bind.stderr
    try:
        assert ssh("node2", f"cat {target}").stdout == "node2's own\n"
        assert ssh("node1", f"cat {target}").stdout == "original\n"
        assert target.read_text() == "original\n"
    finally:
        unbind = run_testbed("unbind", "--dir", str(BED_DIR), "node2", str(target))
        target.unlink()
    assert unbind.returncode == 0, unbind.stderr


def forward_policy() -> str:
    """The policy of the host's iptables FORWARD chain (ACCEPT, DROP)."""
    return next(x.split()[2] for x in forward.chain().splitlines() if x.startswith("-P FORWARD"))


def node1_reaches_node2() -> bool:
    """node1 gets node2's sshd banner across the bridge (within 5 s)."""
    got = ssh("node1", "timeout 5 bash -c 'exec 3<>/dev/tcp/10.99.0.2/22 && head -c 8 <&3'")
    return got.stdout == "SSH-2.0-"


def test_a_forward_drop_policy_does_not_cut_the_bridge(bed: dict[str, Any]) -> None:
    """A system Docker daemon sets the FORWARD policy to DROP with bridged frames passing
    iptables: `up` then accepts the bed's bridged traffic, and `down` takes its rule away."""
    filtered = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
    assert filtered.exists(), "br_netfilter is not loaded here: `modprobe br_netfilter` (as dockerd does)"
    was_filtered, was_policy = filtered.read_text(), forward_policy()
    was_open = "spark-launch-testbed" in forward.chain()  # a DROP policy of the host's own
    try:
        filtered.write_text("1")
        subprocess.run(["iptables", "-P", "FORWARD", "DROP"], check=True)
        assert not node1_reaches_node2()  # the trap is real here
        bring_up()
        assert node1_reaches_node2()
        assert "-i sltb+ -o sltb+" in forward.chain() and "spark-launch-testbed" in forward.chain()
    finally:
        subprocess.run(["iptables", "-P", "FORWARD", was_policy], check=True)
        filtered.write_text(was_filtered)
        if not was_open:
            forward.close()  # the host's filter as it was


def test_down_leaves_no_namespace_or_sshd(bed: dict[str, Any]) -> None:
    """down removes namespaces, sshds, veths and bridge; a second down succeeds too."""
    try:
        first = run_testbed("down", "--dir", str(BED_DIR))
        assert first.returncode == 0, first.stderr
        assert bed_namespaces() == []
        assert live_bed_sshds() == []
        links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout
        assert "sltb" not in links
        assert run_testbed("status", "--dir", str(BED_DIR)).returncode == 3
        second = run_testbed("down", "--dir", str(BED_DIR))
        assert second.returncode == 0, second.stderr
        assert "already down" in second.stdout
    finally:
        bring_up()  # later tests in the session still get a bed
