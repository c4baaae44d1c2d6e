"""`init` on the real test bed: from two host names to a spec that validates, passes `check`
and serves with `up`, without an edit. The bed is given extra links for it: a fabric named
differently on each node (fab1, fab2 on their own bridge), a subnet both nodes hold but no
wire joins (iso), and one only node2 holds (lone). A host that cannot be reached, an unknown
host key and a node without vLLM each end with a clear message and no spec that pretends."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import BED, cli, marked_processes, only

pytestmark = pytest.mark.testbed

SSH_CONFIG = BED / "ssh_config"
CLUSTER = "initbed"


def run_bed(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def links(testbed: Path) -> Iterator[None]:
    """The extra links, for this module only."""
    run_bed("link", "del")
    run_bed("link", "add", "node1", "fab1", "10.97.0.1/24", "--bridge", "sltbf1")
    run_bed("link", "add", "node2", "fab2", "10.97.0.2/24", "--bridge", "sltbf1")
    run_bed("link", "add", "node1", "iso", "10.98.0.1/24")  # wired to nothing
    run_bed("link", "add", "node2", "iso", "10.98.0.2/24")
    run_bed("link", "add", "node2", "lone", "10.96.0.2/24")
    yield
    run_bed("link", "del")


def init(output: Path, *args: str | Path, hosts: str = "node1,node2") -> subprocess.CompletedProcess[str]:
    return cli(
        "init",
        "--hosts",
        hosts,
        "--ssh-config",
        SSH_CONFIG,
        "-o",
        output,
        *args,
        timeout=300,
    )


@pytest.fixture(scope="module")
def written(links: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`init` with the model and the venv given, as a new user would run it."""
    spec = tmp_path_factory.mktemp("init") / "bed.yaml"
    began = time.monotonic()
    done = init(spec, "--model", BED / "model", "--venv", BED / "vllm", "--name", CLUSTER, "--json")
    seconds = time.monotonic() - began
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    print(f"\ninit on 2 bed nodes: {seconds:.1f} s wall, {result['seconds']} s measured by init")
    return {"spec": spec, "result": result, "text": spec.read_text()}


def test_the_fabric_is_the_link_that_connects_with_each_nodes_own_name(written: dict[str, Any]) -> None:
    result = written["result"]
    assert result["ready"] and result["problems"] == []
    assert result["fabric"] == {
        "node1": {"interface": "fab1", "address": "10.97.0.1", "hca": []},
        "node2": {"interface": "fab2", "address": "10.97.0.2", "hca": []},
    }
    others = "\n".join(result["fabric_others"])
    assert "10.98.0.0/24 (iso on every node): NOT reachable (node2: " in others
    assert "lone 10.96.0.0/24 on node2: node1 has no address in it" in others
    assert "10.99.0.0/24 (eth0 on every node): reachable, the network SSH arrives on" in others
    text = written["text"]
    assert "interface: fab2  # NCCL/GLOO_SOCKET_IFNAME; names differ between nodes" in text


def test_the_spec_validates_and_the_nodes_pass_check(written: dict[str, Any]) -> None:
    assert cli("validate", written["spec"]).returncode == 0
    done = cli("check", written["spec"], "--json", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    rows = {r["item"]: r for r in json.loads(done.stdout)["rows"]}
    assert rows["node1:29501 reachable"]["values"] == {"node2": "yes"}


@pytest.mark.vllm_server
def test_up_serves_with_the_spec_as_written(written: dict[str, Any]) -> None:
    spec = written["spec"]
    cli("down", spec, "--grace", "5")
    try:
        up = cli("up", spec, "--no-probe", "--json", timeout=900)  # check ran above, probe included
        assert up.returncode == 0, up.stderr[-3000:]
        assert only(up.stdout)["url"] == "http://10.97.0.1:8000/v1"
        verify = cli("verify", spec, "--json", timeout=300)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert all(c["ok"] for c in only(verify.stdout)["checks"])
    finally:
        cli("down", spec, "--grace", "5")
    assert marked_processes(CLUSTER) == []


def test_facts_reports_each_node_raw(links: None) -> None:
    done = cli(
        "facts", "--hosts", "node1,node2", "--ssh-config", SSH_CONFIG, "--venv", BED / "vllm", "--json"
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    names = {n: {i["name"] for i in f["interfaces"]} for n, f in facts.items()}
    assert {"lo", "eth0", "fab1", "iso"} <= names["node1"] and not {"fab2", "lone"} & names["node1"]
    assert {"lo", "eth0", "fab2", "iso", "lone"} <= names["node2"]
    assert facts["node2"]["ssh_address"] == "10.99.0.2"
    assert facts["node1"]["vllm"]["vllm_version"].startswith("0.32.0")
    assert "models_found" in facts["node1"]  # no --model: the usual places were searched


def test_an_unreachable_host_writes_nothing(testbed: Path, tmp_path: Path) -> None:
    spec = tmp_path / "x.yaml"
    done = init(spec, "--venv", BED / "vllm", hosts="node1,root@10.99.0.9")
    assert done.returncode == 4, done.stderr
    # Timed out, or refused: how an absent address fails depends on ARP's timing.
    # Every host not reached, once, with the reason and the ssh line (the user kept); nothing asked.
    assert "spark-launch: cannot reach 1 of 2 node(s) (10.99.0.9): no spec was written" in done.stderr
    assert "\n  10.99.0.9: " in done.stderr and "root@10.99.0.9:22" in done.stderr
    assert "root@10.99.0.9 true`" in done.stderr and "asking" not in done.stderr
    assert not spec.exists()


def test_an_unknown_host_key_is_refused_and_nothing_written(testbed: Path, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = tmp_path / "ssh_config"
    config.write_text(SSH_CONFIG.read_text().replace(str(BED / "known_hosts"), str(empty)))
    spec = tmp_path / "x.yaml"
    done = cli("init", "--hosts", "node1,node2", "--ssh-config", config, "-o", spec, timeout=120)
    assert done.returncode == 4
    assert f"the host key of root@10.99.0.1:22 is not in {empty}: refusing to connect" in done.stderr
    assert not spec.exists() and empty.read_text() == ""


@contextmanager
def empty_on_node2(target: Path, tmp_path: Path) -> Iterator[None]:
    """An empty directory over `target`, on node2 only."""
    empty = tmp_path / "empty"
    empty.mkdir()
    run_bed("bind", "node2", str(empty), str(target))
    try:
        yield
    finally:
        run_bed("unbind", "node2", str(target))


def test_a_node_without_vllm_gets_a_marked_choice_not_a_spec_that_pretends(
    testbed: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "x.yaml"
    with empty_on_node2(BED / "vllm", tmp_path):
        done = init(spec, "--model", BED / "model", "--venv", BED / "vllm")
    assert done.returncode == 2, done.stderr
    assert "needs an edit before it can run" in done.stderr
    assert "vllm.venv: must be an absolute path" in done.stderr
    text = spec.read_text()
    assert f"no vLLM at {BED / 'vllm'} on node2" in text.replace("\n  # ", " ")
    assert "venv: <CHOOSE>" in text.replace('"', "")
    assert cli("validate", spec).returncode == 2
