"""The discover node script: the RDMA mapping read from a DGX Spark-shaped sysfs tree (no RDMA
device exists here) by the same code that reads the real /sys, the model checks, the search
of the usual places, and the script as sent, run for real on this machine."""

from __future__ import annotations

import inspect
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from launcher.core import remote
from launcher.core.answers.discover_answer import discovered
from launcher.node.agent import Agent
from launcher.node.scripts import bundle, discover
from tests.fakes.local import LocalExecutor
from tests.init_facts import spark_sys


def by_name(root: Path | str) -> dict[str, dict[str, Any]]:
    return {i["name"]: i for i in discover.interfaces(str(root), {})}


def test_a_spark_port_maps_to_its_own_roce_device_and_its_twin() -> None:
    ifaces = by_name(spark_sys())
    cabled = ifaces["enp1s0f1np1"]
    assert [(r["device"], r["via"], r["state"]) for r in cabled["rdma"]] == [
        ("rocep1s0f1", "netdev", "ACTIVE"),
        ("roceP2p1s0f1", "twin", "ACTIVE"),
    ]
    assert cabled["speed"] == 200000 and cabled["pci"] == "0000:01:00.1" and cabled["state"] == "up"
    twin = ifaces["enP2p1s0f1np1"]
    assert [(r["device"], r["via"]) for r in twin["rdma"]] == [
        ("roceP2p1s0f1", "netdev"),
        ("rocep1s0f1", "twin"),
    ]


def test_the_uncabled_port_is_down_with_its_devices_down() -> None:
    port = by_name(spark_sys())["enp1s0f0np0"]
    assert port["state"] == "down" and port["speed"] is None  # the kernel's -1: unknown
    assert [(r["device"], r["state"]) for r in port["rdma"]] == [
        ("rocep1s0f0", "DOWN"),
        ("roceP2p1s0f0", "DOWN"),
    ]


def test_another_adapter_at_the_same_bus_device_function_is_no_twin() -> None:
    """The LAN port sits at 0007:01:00.0, like the ConnectX-7's 0000:01:00.0: not the same adapter."""
    ifaces = by_name(spark_sys())
    assert ifaces["enP7s7"]["pci"] == "0007:01:00.0" and ifaces["enP7s7"]["rdma"] == []
    assert ifaces["docker0"]["pci"] is None and ifaces["docker0"]["rdma"] == []
    assert ifaces["lo"]["loopback"] and not ifaces["enP7s7"]["loopback"]


def test_a_second_card_of_the_same_model_in_another_domain_is_no_twin(tmp_path: Path) -> None:
    """A server with two ConnectX-7 cards at 0000:01:00.1 and 0001:01:00.1: two adapters (two
    system image GUIDs), so neither port lends its RoCE device to the other."""
    root = tmp_path / "sys"
    shutil.copytree(spark_sys(), root, symlinks=True)
    function = root / "devices" / "pci0001:00" / "0001:00:00.0" / "0001:01:00.1"
    ib = function / "infiniband" / "mlx5_9"
    (function / "net" / "ens9np1").mkdir(parents=True)
    for name, text in (("operstate", "up"), ("speed", "200000"), ("type", "1")):
        (function / "net" / "ens9np1" / name).write_text(text + "\n")
    (function / "vendor").write_text("0x15b3\n")
    (function / "device").write_text("0x1021\n")
    (ib / "ports" / "1" / "gid_attrs" / "ndevs").mkdir(parents=True)
    (ib / "ports" / "1" / "state").write_text("4: ACTIVE\n")
    (ib / "ports" / "1" / "gid_attrs" / "ndevs" / "0").write_text("ens9np1\n")
    (ib / "sys_image_guid").write_text("4cbb:4703:00ff:0001\n")
    (ib / "device").symlink_to("../..")
    (function / "net" / "ens9np1" / "device").symlink_to("../..")
    (root / "class" / "infiniband" / "mlx5_9").symlink_to(
        "../../devices/pci0001:00/0001:00:00.0/0001:01:00.1/infiniband/mlx5_9"
    )
    (root / "class" / "net" / "ens9np1").symlink_to(
        "../../devices/pci0001:00/0001:00:00.0/0001:01:00.1/net/ens9np1"
    )
    ifaces = by_name(root)
    assert [r["device"] for r in ifaces["ens9np1"]["rdma"]] == ["mlx5_9"]
    assert [r["device"] for r in ifaces["enp1s0f1np1"]["rdma"]] == ["rocep1s0f1", "roceP2p1s0f1"]


def test_the_rdma_devices_read_from_the_tree() -> None:
    devices = {d["device"]: d for d in discover.rdma_devices(str(spark_sys()))}
    assert set(devices) == {"rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"}
    assert devices["roceP2p1s0f1"]["pci"] == "0002:01:00.1"
    assert devices["roceP2p1s0f1"]["pci_id"] == "0x15b3:0x1021"
    assert devices["roceP2p1s0f1"]["sys_image_guid"] == devices["rocep1s0f1"]["sys_image_guid"]
    assert devices["rocep1s0f1"]["netdevs"] == ["enp1s0f1np1"]
    assert devices["rocep1s0f1"]["ports"][0]["link_layer"] == "Ethernet"


def test_the_same_code_reads_this_machines_sys() -> None:
    assert inspect.signature(discover.discover).parameters["root"].default == "/sys"
    ifaces = by_name("/sys")
    assert ifaces and any(i["loopback"] for i in ifaces.values())
    addresses = discover.ip_addresses()
    assert any(a["address"] == "127.0.0.1" for a in addresses.get("lo", []))


def write_model(path: Path, shards: int = 2, index: bool = True, tokenizer: bool = True) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    if tokenizer:
        (path / "tokenizer.json").write_text("{}")
    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    for name in names:
        (path / name).write_bytes(b"x" * 100)
    if index:
        (path / "model.safetensors.index.json").write_text(
            json.dumps({"weight_map": {f"w{i}": n for i, n in enumerate(names)}})
        )
    return path


def test_a_complete_model_and_a_missing_shard(tmp_path: Path) -> None:
    model = write_model(tmp_path / "m")
    check = discover.model_check(str(model))
    assert check["exists"] and check["weights"] == 2 and check["weight_bytes"] == 200
    assert check["missing_shards"] == [] and check["tokenizer"] == ["tokenizer.json"]
    assert check["config"] == {"architectures": ["LlamaForCausalLM"]}
    (model / "model-00002-of-00002.safetensors").unlink()
    assert discover.model_check(str(model))["missing_shards"] == ["model-00002-of-00002.safetensors"]
    assert discover.model_check(str(tmp_path / "nothing")) == {
        "path": str(tmp_path / "nothing"),
        "exists": False,
    }


def test_models_are_found_in_the_hf_cache_and_model_folders(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    snapshot = write_model(hub / "models--Qwen--Tiny" / "snapshots" / "abc123")
    flat = write_model(tmp_path / "models" / "llama")
    nested = write_model(tmp_path / "models" / "org" / "name", index=False)
    (tmp_path / "models" / "notes").mkdir()  # no config.json: not a model
    found = discover.models_found(str(hub), [str(tmp_path / "models")])
    assert [f["path"] for f in found] == sorted(map(str, (snapshot, flat, nested)))
    assert all("config" not in f for f in found)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home for LocalExecutor, with a Hugging Face cache holding one model."""
    write_model(tmp_path / ".cache" / "huggingface" / "hub" / "models--a--b" / "snapshots" / "r1")
    return tmp_path


def test_the_script_as_sent_answers_on_this_machine(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    agent = Agent(LocalExecutor(home), "init", "local")
    answer = agent.ask(remote.discover_call(agent.dir, {"venv_places": [str(home / "no-venv")]}), discovered)
    assert answer["boot_id"] and answer["host"]["MemTotal"] > 0
    assert any(i["loopback"] for i in answer["interfaces"])
    assert answer["venvs_found"] == []
    assert [m["path"] for m in answer["models_found"]] == [
        str(home / ".cache/huggingface/hub/models--a--b/snapshots/r1")
    ]


def test_the_script_borrows_facts_functions_without_their_entry() -> None:
    source = bundle("discover")
    compile(source, "<discover as sent>", "exec")
    assert "def vllm_facts(" in source and "def host_facts(" in source
    assert source.count('if __name__ == "__main__":') == 1  # facts.py's own entry is left out
    assert source.rstrip().endswith("main(sys.argv[2:])")
    assert "def discover(" not in bundle("check_facts")


def test_a_venv_found_in_a_usual_place_is_reported(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.12" / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm-0.33.0.dist-info").mkdir()
    (venv / "bin").mkdir()
    (venv / "bin" / "vllm").write_text("#!/bin/sh\n")
    os.chmod(venv / "bin" / "vllm", 0o755)
    found = discover.venvs_found([str(venv), str(tmp_path / "absent")])
    assert [(f["venv"], f["vllm_version"], f["vllm_binary"]) for f in found] == [(str(venv), "0.33.0", True)]
