"""Host facts and the regression table, on /proc and /sys trees shaped as a DGX Spark shows them.

tests/data/procfs-dgx-spark is a Spark booted into kernel 7.0.0-1019-nvidia with its default
command line (kexec handover on: CmaFree above CmaTotal); tests/data/sysfs-dgx-spark its /sys
(the ConnectX-7 port `enp1s0f1np1` with its two RoCE twins). Both are read by the very
functions the node runs (launcher/node/scripts/hostinfo.py), with their roots moved.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from launcher.core.answers import hosts_answer as answers
from launcher.core.answers.read import At
from launcher.core.checks import host_rows, regression_rows
from launcher.core.checks.regressions import REGRESSIONS
from launcher.node.scripts import hostinfo
from launcher.node.scripts.memory import parse_gpu_query
from tests.conftest import ROOT, base_spec, edit, plan_of, spec_of
from tests.init_facts import spark_sys

DATA = ROOT / "tests" / "data"
PORT = "enp1s0f1np1"
TWINS = ["rocep1s0f1", "roceP2p1s0f1"]


def spark_proc(tmp_path: Path) -> Path:
    """A copy of the DGX Spark's /proc a test may change."""
    root = tmp_path / "proc"
    shutil.copytree(DATA / "procfs-dgx-spark", root)
    return root


def details(proc: Path | str, hcas: list[str] = TWINS, interface: str = PORT) -> dict[str, Any]:
    request = {"interface": interface, "hcas": hcas, "smi": False}
    return hostinfo.host_details(request, None, sys_root=str(spark_sys()), proc_root=str(proc))


def test_a_spark_s_host_facts_read_from_its_trees(tmp_path: Path) -> None:
    found = details(spark_proc(tmp_path))
    assert found["kernel"] == "7.0.0-1019-nvidia"
    assert found["cma"] == {"CmaTotal": 0, "CmaFree": 10170368 * 1024}
    assert found["nvidia"] == {"driver": "580.95.05", "cuda": None}
    assert found["link"] == {"state": "up", "speed": 200000, "mtu": 9000}
    assert [(d["device"], d["listed"], d["state"], d["link_layer"]) for d in found["hcas"]] == [
        ("rocep1s0f1", True, "ACTIVE", "Ethernet"),
        ("roceP2p1s0f1", True, "ACTIVE", "Ethernet"),
    ]
    assert found["firmware"] == "28.45.4028"
    assert found["bios"] == "5.36_0ACUM023 (12/05/2025)"


def test_a_spark_s_host_facts_pass_the_launchers_strict_reader_unchanged(tmp_path: Path) -> None:
    raw = details(spark_proc(tmp_path))
    read = answers.host_details(At(json.loads(json.dumps(raw)), "host_details"))
    assert {k: v for k, v in read.items() if k != "hcas"} == {k: v for k, v in raw.items() if k != "hcas"}
    assert [{k: d.get(k) for k in h} for h, d in zip(read["hcas"], raw["hcas"], strict=True)] == read["hcas"]


def test_a_twin_the_spec_leaves_out_is_still_read_and_marked_unlisted(tmp_path: Path) -> None:
    found = details(spark_proc(tmp_path), hcas=["rocep1s0f1"])
    assert [(d["device"], d["listed"], d["via"]) for d in found["hcas"]] == [
        ("rocep1s0f1", True, "netdev"),
        ("roceP2p1s0f1", False, "twin"),
    ]


def test_a_listed_device_that_does_not_exist_is_marked_absent(tmp_path: Path) -> None:
    found = details(spark_proc(tmp_path), hcas=["mlx5_7"])
    assert found["hcas"][0] == {"device": "mlx5_7", "listed": True, "present": False}


def test_nvidia_smi_q_gives_the_driver_and_its_cuda() -> None:
    text = (DATA / "gb10-nvidia-smi-q.txt").read_text()
    assert hostinfo.parse_smi_versions(text) == {"driver": "580.95.05", "cuda": "13.0"}


def test_the_same_code_reads_this_machines_proc_and_sys() -> None:
    found = hostinfo.host_details({"interface": "lo", "hcas": [], "smi": False}, None)
    assert found["kernel"] == os.uname().release
    assert found["link"]["mtu"] and found["link"]["mtu"] > 0
    assert found["open_files"][0] <= found["open_files"][1]


# -- the rows ------------------------------------------------------------------------------------


def node_facts(proc: Path, **host: Any) -> dict[str, Any]:
    """What the facts script reports, for the rows: the Spark's host details, a GB10."""
    found = {
        "host_details": {**details(proc), "nccl": "2.30.7", "open_files": [1024, 524288], **host},
        "memory": {"gpus": parse_gpu_query((DATA / "gb10-nvidia-smi.txt").read_text())},
    }
    return found


def spark_spec(**changes: Any) -> Any:
    data = edit(base_spec(), **{"nodes.0.interface": PORT, "nodes.1.interface": PORT, **changes})
    data["nodes"][0]["hca"] = data["nodes"][1]["hca"] = TWINS
    return spec_of(data)


def rows_by_item(facts: dict[str, dict[str, Any]], **changes: Any) -> dict[str, Any]:
    return {r.item: r for r in host_rows(spark_spec(**changes), facts)}


@pytest.fixture
def two_sparks(tmp_path: Path) -> dict[str, dict[str, Any]]:
    proc = spark_proc(tmp_path)
    return {"n1": node_facts(proc), "n2": node_facts(proc)}


def test_two_alike_sparks_pass_every_host_row(two_sparks: dict[str, dict[str, Any]]) -> None:
    rows = rows_by_item(two_sparks)
    assert [item for item, r in rows.items() if not r.ok] == []
    assert rows[f"{PORT} mtu"].values == {"n1": 9000, "n2": 9000}
    assert rows["hca ports active"].values["n1"] == "rocep1s0f1 ACTIVE, roceP2p1s0f1 ACTIVE"


def test_an_mtu_that_differs_blocks_naming_both_values(two_sparks: dict[str, dict[str, Any]]) -> None:
    two_sparks["n2"]["host_details"]["link"]["mtu"] = 1500
    row = rows_by_item(two_sparks)[f"{PORT} mtu"]
    assert row.failed and row.values == {"n1": 9000, "n2": 1500}
    assert "same MTU" in str(row.hint)


@pytest.mark.parametrize(
    ("section", "key", "value", "item", "blocks"),
    [
        ("host_details", "kernel", "6.17.0-1032-nvidia", "kernel", False),
        ("host_details", "bios", "5.36_0ACUM018", "bios", False),
        ("host_details", "firmware", "28.44.1036", "nic firmware", False),
        ("host_details", "open_files", [1024, 4096], "open files (soft, hard)", False),
        ("host_details", "nccl", "2.28.9", "nccl", True),
    ],
)
def test_what_differs_blocks_or_is_reported_and_says_why(
    two_sparks: dict[str, dict[str, Any]], section: str, key: str, value: Any, item: str, blocks: bool
) -> None:
    two_sparks["n2"][section][key] = value
    row = rows_by_item(two_sparks)[item]
    assert not row.ok and row.failed is blocks and row.hint
    assert row.hint.startswith("reported, not blocking") is not blocks


def test_another_gpu_model_blocks(two_sparks: dict[str, dict[str, Any]]) -> None:
    two_sparks["n2"]["memory"]["gpus"] = parse_gpu_query((DATA / "h100-nvidia-smi.txt").read_text())
    rows = rows_by_item(two_sparks)
    assert rows["gpu"].failed and "attention backend" in str(rows["gpu"].hint)
    assert not rows["gpu memory"].ok and not rows["gpu memory"].failed


def test_a_port_down_blocks_and_a_twin_left_out_is_reported(two_sparks: dict[str, dict[str, Any]]) -> None:
    two_sparks["n2"]["host_details"]["hcas"][1]["state"] = "DOWN"
    assert rows_by_item(two_sparks)["hca ports active"].failed
    two_sparks["n2"]["host_details"]["hcas"][1].update(state="ACTIVE", listed=False)
    row = rows_by_item(two_sparks)["hca twins listed"]
    assert not row.ok and not row.failed and row.values["n2"] == "roceP2p1s0f1 not listed"


def test_a_link_that_is_down_blocks(two_sparks: dict[str, dict[str, Any]]) -> None:
    two_sparks["n1"]["host_details"]["link"]["state"] = "down"
    row = rows_by_item(two_sparks)[f"{PORT} link up"]
    assert row.failed and row.values == {"n1": "down", "n2": "up"}


# -- the regression table ------------------------------------------------------------------------


def regressions(facts: dict[str, dict[str, Any]], **serve: Any) -> dict[str, Any]:
    plan = plan_of(edit(base_spec(), **{f"serve.{k}": v for k, v in serve.items()}))
    return {r.item: r for r in regression_rows(plan, facts)}


KHO = "known regression: kernel 7.0 (DGX OS 7.0.0-1019-nvidia) with kexec handover on"
DRIVER = "known regression: NVIDIA driver 590 on GB10 (CUDA-graph capture deadlocks)"


def test_the_kexec_handover_kernel_is_named_with_its_fix(tmp_path: Path) -> None:
    proc = spark_proc(tmp_path)
    healthy = tmp_path / "healthy"
    shutil.copytree(proc, healthy)
    (healthy / "sys" / "kernel" / "osrelease").write_text("6.17.0-1032-nvidia\n")
    (healthy / "meminfo").write_text((DATA / "gb10-meminfo.txt").read_text())
    rows = regressions({"n1": node_facts(healthy), "n2": node_facts(proc)})
    row = rows[KHO]
    assert row.failed and row.values["n1"] == "no"
    assert (
        row.values["n2"]
        == "MATCHES: kernel 7.0.0-1019-nvidia, CmaFree 9.7 GiB > CmaTotal 0.0 GiB, no kho=off"
    )
    assert "kho=off" in str(row.hint) and "ibv_reg_mr" in str(row.hint)


def test_kho_off_on_the_command_line_clears_it(tmp_path: Path) -> None:
    proc = spark_proc(tmp_path)
    (proc / "cmdline").write_text((proc / "cmdline").read_text().strip() + " kho=off\n")
    (proc / "meminfo").write_text((DATA / "gb10-meminfo.txt").read_text())
    rows = regressions({"n1": node_facts(proc), "n2": node_facts(proc)})
    assert list(rows) == ["known regressions"] and rows["known regressions"].ok


def test_the_590_driver_on_a_gb10_blocks_unless_the_plan_runs_eager(tmp_path: Path) -> None:
    proc = spark_proc(tmp_path)
    (proc / "meminfo").write_text((DATA / "gb10-meminfo.txt").read_text())
    facts = {"n1": node_facts(proc), "n2": node_facts(proc)}
    facts["n2"]["host_details"]["nvidia"] = {"driver": "590.44.01", "cuda": "13.1"}
    row = regressions(copy.deepcopy(facts))[DRIVER]
    assert row.failed and row.values == {"n1": "no", "n2": "MATCHES: gpu NVIDIA GB10, driver 590.44.01"}
    assert "580" in str(row.hint)
    eager = regressions(facts, enforce_eager=True)[DRIVER]
    assert not eager.ok and not eager.failed and "--enforce-eager" in str(eager.hint)


def test_every_entry_of_the_table_says_what_it_does_how_to_fix_it_and_where_it_was_reported() -> None:
    for entry in REGRESSIONS:
        assert entry.when and entry.symptom and entry.fix
        assert entry.sources and all(s.startswith("https://") for s in entry.sources)
