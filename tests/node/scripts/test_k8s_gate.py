"""The exported pods' agreement gate: `check`'s comparison for one node, run in the pod.

It holds the pod's own vLLM to the values the export writes into the ConfigMap, and fails on
exactly the settings `check`'s probe rows fail on for that answer; a refusal names them in the
pod's termination message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.core.checks.probe_rows import AGREE, HASH_ITEM, probe_rows
from launcher.core.vllm.releases import same_release
from launcher.load import catalog_for, plan_file
from launcher.node.scripts import k8s_gate
from tests.conftest import ROOT
from tests.invoke import invoke

CONFIG = ROOT / "configs" / "qwen3-next-2x-spark.yaml"
LEADER = "spark-pair-0.spark-pair.default"  # LWS_LEADER_ADDRESS of the group's leader
POD_ENV = {"LWS_LEADER_ADDRESS": LEADER, "LWS_WORKER_INDEX": "1"}


@pytest.fixture(autouse=True)
def models_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("launcher.load.local_model_files", lambda spec: None)


def shipped_expected() -> dict[str, Any]:
    """expected.json as the export writes it into the ConfigMap."""
    done = invoke(["export", "k8s", str(CONFIG)])
    config_map = next(o for o in yaml.safe_load_all(done.output) if o and o["kind"] == "ConfigMap")
    return dict(json.loads(config_map["data"]["expected.json"]))


def as_planned(expected: dict[str, Any]) -> dict[str, Any]:
    """What a pod's vLLM derives when it agrees: every planned value (the leader's address as LWS
    gives it), and something for every other key the probe reports."""
    resolved: dict[str, Any] = dict.fromkeys(AGREE, "derived")
    resolved.update(expected["settings"], master_addr=LEADER, missing=[])
    return resolved


def gate_says(resolved: dict[str, Any], expected: dict[str, Any], version: str = "0.33.0") -> list[str]:
    result = {"ok": True, "vllm_version": version, "resolved": resolved}
    return k8s_gate.differences(result, expected, POD_ENV)


def check_fails(resolved: dict[str, Any]) -> set[str]:
    """The probe rows `check` fails for one node answering `resolved` (the hash needs two nodes)."""
    spec, plan = plan_file(CONFIG)
    rows = probe_rows(plan, catalog_for(spec), {"pod": {**resolved, "master_addr": "10.0.0.1"}})
    return {r.item for r in rows if not r.ok and r.item != HASH_ITEM}


def test_the_config_map_holds_checks_planned_values() -> None:
    expected = shipped_expected()
    assert expected["settings"]["enable_prefix_caching"] is True
    assert expected["settings"]["master_addr"] == "$(LWS_LEADER_ADDRESS)"
    assert expected["pins"]["num_speculative_tokens"] == "--speculative-config"
    assert expected["vllm_version"] == "0.33.0"


def test_a_pod_that_derives_the_plan_passes() -> None:
    expected = shipped_expected()
    assert gate_says(as_planned(expected), expected) == []
    assert gate_says(as_planned(expected), expected, version="0.33.0+cu130") == []
    assert check_fails(as_planned(expected)) == set()


@pytest.mark.parametrize(
    ("key", "derived"),
    [("enable_prefix_caching", False), ("num_speculative_tokens", 1), ("master_port", 29500), ("nnodes", 1)],
)
def test_the_gate_fails_where_check_fails(key: str, derived: Any) -> None:
    expected = shipped_expected()
    resolved = {**as_planned(expected), key: derived}
    said = gate_says(resolved, expected)
    assert [line.split(":")[0] for line in said] == [key]
    assert f"pinned by {AGREE[key]}" in said[0]
    assert check_fails(resolved) == {key}


def test_a_setting_this_vllm_cannot_report_is_no_agreement() -> None:
    expected = shipped_expected()
    resolved = {**as_planned(expected), "missing": ["enable_chunked_prefill"]}
    assert gate_says(resolved, expected) == [
        "enable_chunked_prefill: not reported by this vLLM (planned True, --enable-chunked-prefill)"
    ]
    assert check_fails(resolved) == {"enable_chunked_prefill"}


def test_the_leader_address_is_the_pods_own() -> None:
    expected = shipped_expected()
    said = gate_says({**as_planned(expected), "master_addr": "10.0.0.1"}, expected)
    assert said == [f"master_addr: '10.0.0.1' (planned '{LEADER}', pinned by --master-addr)"]


@pytest.mark.parametrize(
    ("written", "reported"),
    [("0.33.0", "0.33.0"), ("0.33.0", "0.33.0+cu130"), ("0.33.0+cu130", "0.33.0"), ("0.33.0", "0.32.0")],
)
def test_the_release_is_checks_release(written: str, reported: str) -> None:
    assert k8s_gate.same_release(written, reported) == same_release(written, reported)


def test_a_refusal_names_the_settings_and_stops_the_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = shipped_expected()
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    log = tmp_path / "termination-log"
    log.touch()  # the kubelet makes it in a pod
    monkeypatch.setattr(k8s_gate, "TERMINATION_LOG", str(log))
    monkeypatch.setattr(k8s_gate.os, "environ", POD_ENV)
    seen: list[list[str]] = []

    def resolve(op: str, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
        seen.append(argv)
        resolved = {**as_planned(expected), "enable_prefix_caching": False}
        return {"ok": True, "vllm_version": "0.33.0", "resolved": resolved}

    monkeypatch.setattr(k8s_gate, "run_job", resolve)
    argv = ["/models/m", "--enable-prefix-caching", "--node-rank=1", "--headless"]
    assert k8s_gate.main([str(tmp_path / "expected.json"), "--", *argv]) == 1
    assert seen == [argv]
    message = log.read_text()
    assert message.startswith("spark-launch gate: spark-pair's vLLM would not start as planned (plan ")
    assert "  enable_prefix_caching: False (planned True, pinned by --enable-prefix-caching)" in message
    assert capsys.readouterr().out.startswith("SPARK_LAUNCH_PROBE {")  # the answer, in kubectl logs


def test_an_agreeing_pod_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = shipped_expected()
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    (tmp_path / "termination-log").touch()
    monkeypatch.setattr(k8s_gate, "TERMINATION_LOG", str(tmp_path / "termination-log"))
    monkeypatch.setattr(k8s_gate.os, "environ", POD_ENV)
    answer = {"ok": True, "vllm_version": "0.33.0", "resolved": as_planned(expected)}
    monkeypatch.setattr(k8s_gate, "run_job", lambda *_: answer)
    assert k8s_gate.main([str(tmp_path / "expected.json"), "--", "/models/m"]) == 0
    assert (tmp_path / "termination-log").read_text() == ""


def test_a_command_vllm_rejects_stops_the_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "expected.json").write_text(json.dumps(shipped_expected()))
    log = tmp_path / "termination-log"
    log.touch()
    monkeypatch.setattr(k8s_gate, "TERMINATION_LOG", str(log))
    failed = {"ok": False, "error": "the vLLM parser rejected the command (exit 2)"}
    monkeypatch.setattr(k8s_gate, "run_job", lambda *_: failed)
    assert k8s_gate.main([str(tmp_path / "expected.json"), "--", "/models/m", "--node-rank=$(X)"]) == 1
    assert (
        "vLLM rejects the planned command: the vLLM parser rejected the command (exit 2)" in log.read_text()
    )
    assert k8s_gate.main(["expected.json"]) == 2  # usage
