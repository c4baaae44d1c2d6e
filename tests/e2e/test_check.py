"""`check` on the real test bed: alike nodes pass; each divergence, injected for real on
node2 only (its own mount namespace, its own sshd environment), is caught before anything
starts, naming the node, the setting, both values and the fix. `up` refuses the same way."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import BED, DEMO, cli, down_if_running, hold_port, marked_processes, spec_file

pytestmark = pytest.mark.testbed


def run_bed(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


@contextmanager
def on_node2(source: Path, target: Path) -> Iterator[None]:
    """`source` appears at `target` on node2 only."""
    run_bed("bind", "node2", str(source), str(target))
    try:
        yield
    finally:
        run_bed("unbind", "node2", str(target))


def check(spec: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = cli("check", spec, "--json", *args, timeout=600)
    return done.returncode, json.loads(done.stdout)


def failing(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["item"]: r for r in report["rows"] if not r["ok"] and r["level"] == "fail"}


def test_alike_nodes_pass_with_the_probe(testbed_clean: None) -> None:
    code, report = check(DEMO)
    assert code == 0, failing(report)
    rows = {r["item"]: r["values"] for r in report["rows"] if r["area"] == "probe"}
    assert rows["mamba_cache_mode"] == {"node1": "align", "node2": "align"}
    assert rows["enable_prefix_caching"] == {"node1": True, "node2": True}


def test_a_second_check_is_answered_from_each_nodes_probe_cache(testbed_clean: None) -> None:
    """The first check leaves each node's answer in its cache; the next one finds it in the
    facts call (no vLLM started) and derives the same values."""
    first = check(DEMO)[1]
    code, again = check(DEMO)
    assert code == 0, failing(again)
    answers = {r["item"]: r["values"] for r in again["rows"] if r["area"] == "probe"}
    assert answers["answers"] == {"node1": "from the node's cache", "node2": "from the node's cache"}
    derived = {
        r["item"]: r["values"] for r in first["rows"] if r["area"] == "probe" and r["item"] != "answers"
    }
    assert {k: v for k, v in answers.items() if k != "answers"} == derived


def site_packages() -> Path:
    return next((BED / "vllm" / "lib").resolve().glob("python3*/site-packages"))


def test_a_different_vllm_build_that_derives_differently_is_caught(
    testbed_clean: None, tmp_path: Path
) -> None:
    """node2's vLLM is patched to take the 'prefix caching off' branch of the mamba derivation
    (mode 'none' even when pinned 'align'): a different build, deriving differently from the
    same argv, as in the field failure."""
    original = site_packages() / "vllm/model_executor/models/config.py"
    patched = tmp_path / "config.py"
    text = original.read_text()
    needle = 'if cache_config.enable_prefix_caching:\n            if cache_config.mamba_cache_mode == "none":'
    assert needle in text
    patched.write_text(
        text.replace(needle, needle.replace("if cache_config.enable_prefix_caching:", "if False:"))
    )
    with on_node2(patched, original):
        code, report = check(DEMO)
        up = cli("up", DEMO, timeout=600)
    assert code == 3
    bad = failing(report)
    assert bad["vllm build (files)"]["values"]["node1"] != bad["vllm build (files)"]["values"]["node2"]
    assert bad["mamba_cache_mode"]["values"] == {"node1": "align", "node2": "none"}
    assert "--mamba-cache-mode" in bad["mamba_cache_mode"]["hint"]
    assert up.returncode == 3 and "nothing was started" in up.stderr
    assert "FAIL probe    mamba_cache_mode" in up.stderr
    assert marked_processes() == []


def test_a_different_config_json_is_caught_and_resolves_differently(
    testbed_clean: None, tmp_path: Path
) -> None:
    model = BED / "model"
    changed = tmp_path / "config.json"
    config = json.loads((model / "config.json").read_text())
    config["torch_dtype"] = "float16"
    changed.write_text(json.dumps(config))
    with on_node2(changed, model / "config.json"):
        code, report = check(DEMO)
    assert code == 3
    bad = failing(report)
    assert set(bad) >= {"config.json", "dtype"}
    assert bad["dtype"]["values"] == {"node1": "torch.bfloat16", "node2": "torch.float16"}


def test_a_model_missing_on_one_node_is_caught(testbed_clean: None, tmp_path: Path) -> None:
    parent = Path("/tmp/spark-launch-check")
    subprocess.run(["rm", "-rf", str(parent)], check=True)
    parent.mkdir()
    subprocess.run(["cp", "-r", str(BED / "model"), str(parent / "model")], check=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    spec = spec_file(tmp_path, model={"path": str(parent / "model")})
    with on_node2(empty, parent):  # node2 sees an empty /tmp/spark-launch-check: no model there
        code, report = check(spec, "--no-probe")
    assert code == 3
    row = failing(report)[f"{parent / 'model'} exists"]
    assert row["values"] == {"node1": True, "node2": False} and "copy the model" in row["hint"]


def test_a_different_vllm_variable_in_node2s_environment_is_caught(testbed_clean: None) -> None:
    run_bed("up", "--node-env", "node2:VLLM_USE_V2_MODEL_RUNNER=1")
    try:
        code, report = check(DEMO, "--no-probe")
    finally:
        run_bed("up")
    assert code == 3
    row = failing(report)["VLLM_USE_V2_MODEL_RUNNER"]
    assert row["values"] == {"node1": "(unset)", "node2": "1"} and "spec's env" in row["hint"]


@pytest.mark.parametrize("port", ["8000", "29501"])
def test_a_taken_port_on_the_head_is_caught(testbed_clean: None, port: str) -> None:
    holder = hold_port("sl-node1", port)
    try:
        code, report = check(DEMO, "--no-probe")
        up = cli("up", DEMO, "--no-probe")
    finally:
        holder.kill()
    assert code == 3 and failing(report)[f"port {port} free on node1"]["values"] == {"node1": "IN USE"}
    assert up.returncode == 3 and marked_processes() == []


@pytest.mark.parametrize(
    ("node2", "item"),
    [
        ({"interface": "eth9"}, "interface exists"),
        ({"address": "10.99.0.7"}, "interface holds address"),
    ],
)
def test_a_wrong_interface_or_address_is_caught(
    testbed_clean: None, tmp_path: Path, node2: dict[str, str], item: str
) -> None:
    code, report = check(spec_file(tmp_path, nodes={1: node2}), "--no-probe")
    assert code == 3
    assert failing(report)[item]["values"]["node2"] is False


def test_an_unreachable_node_exits_4(testbed_clean: None, tmp_path: Path) -> None:
    spec = spec_file(tmp_path, nodes={1: {"ssh": "root@10.99.0.9"}})
    done = cli("check", spec, "--no-probe", "--json", timeout=120)
    assert done.returncode == 4
    reached = json.loads(done.stdout)["rows"][0]
    assert reached["item"] == "reachable" and reached["values"]["node1"] == "yes"
    # No host answers there: the connection times out, or is refused where something on the
    # bridge answers for the address. The row names the node already: its value does not.
    assert re.match(
        r"(no answer from root@10\.99\.0\.9:22 within 5 s|connection refused by root@10\.99\.0\.9:22)",
        reached["values"]["node2"],
    )


@pytest.fixture
def testbed_clean(testbed: Path) -> None:
    """The bed up with no cluster running (check must find the ports free)."""
    down_if_running()


def bed_ssh_config(directory: Path, known_hosts: Path) -> Path:
    """The bed's ssh_config with another known_hosts file."""
    text = (BED / "ssh_config").read_text().replace(str(BED / "known_hosts"), str(known_hosts))
    path = directory / "ssh_config"
    path.write_text(text)
    return path


def test_an_unknown_host_key_is_refused_with_how_to_accept_it(testbed_clean: None, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = bed_ssh_config(tmp_path, empty)
    done = cli("check", DEMO, "--no-probe", "--ssh-config", config, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 4
    # The known_hosts file really in use, and the ssh line that reaches the node the same way.
    assert f"the host key of root@10.99.0.1:22 is not in {empty}: refusing to connect" in said
    assert f"accept it: ssh -F {config} -o BatchMode=no node1 true (answer yes)" in said
    assert f"ssh-keyscan -p 22 10.99.0.1 >> {empty}" in said
    assert empty.read_text() == ""  # nothing was added behind the user's back


def test_a_changed_host_key_is_refused(testbed_clean: None, tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = (tmp_path / "other.pub").read_text().split()
    wrong = tmp_path / "known_hosts"
    wrong.write_text("".join(f"10.99.0.{i} {other[0]} {other[1]}\n" for i in (1, 2)))
    done = cli("status", DEMO, "--ssh-config", bed_ssh_config(tmp_path, wrong), timeout=120)
    said = done.stdout + done.stderr
    assert f"host key of root@10.99.0.1:22 has CHANGED since it was recorded in {wrong}" in said
    assert f"ssh-keygen -f {wrong} -R '10.99.0.1'" in said
    assert done.returncode == 4


def test_up_locked_refuses_a_model_file_changed_on_node2_naming_it(
    testbed_clean: None, tmp_path: Path
) -> None:
    """`lock` writes down what both nodes hold; one shard then changes on node2 (same size, one
    byte): `up --locked` names that file and starts nothing. node2 sees the original again after."""
    spec = spec_file(tmp_path)
    done = cli("lock", spec)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "demo.yaml.lock").read_text()
    shard = sorted((BED / "model").glob("*.safetensors"))[0]
    for line in ("[node1]", "[node2]", f"model.file {shard.name} = ", "vllm.build = ", "host.kernel = "):
        assert line in text, text
    assert cli("lock", spec).returncode == 0 and (tmp_path / "demo.yaml.lock").read_text() == text  # stable
    changed = tmp_path / shard.name
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    changed.write_bytes(bytes(data))
    with on_node2(changed, shard):
        up = cli("up", spec, "--locked", "--no-probe", timeout=600)
    assert up.returncode == 3, up.stderr
    assert "the nodes differ from" in up.stderr and "nothing was started" in up.stderr
    assert f"node2: model file {shard.name}: " in up.stderr and "node1:" not in up.stderr
    assert marked_processes() == []
    assert "no runs of demo recorded" in cli("runs", spec).stdout  # no start, so no receipt
