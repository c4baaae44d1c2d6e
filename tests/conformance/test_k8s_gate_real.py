"""The exported pods' agreement gate, run as a pod runs it, under each supported real vLLM.

Each rank's init container of `spark-launch export k8s`: the gate's source and expected.json
from the ConfigMap, its args with what LeaderWorkerSet gives the pod put in, its environment,
run by the release's own Python on a tiny hybrid model. It passes where the plan's release runs,
and refuses (exit 1, the release named in the termination message) under another.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.conftest import RELEASES, cpu_env, venv_for
from tests.conftest import base_spec, edit
from tests.invoke import invoke

pytestmark = pytest.mark.conformance
PLAN_MOUNT = "/spark-launch/"


def exported(tmp: Path, version: str, model: Path) -> list[dict[str, Any]]:
    """The objects `export k8s` writes for a two-node spec of `version` serving `model`."""
    data = edit(
        base_spec(version),
        **{"model.path": str(model), "serve.max_model_len": 2048, "export.k8s.image": "vllm:test"},
    )
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    done = invoke(["export", "k8s", str(spec)])
    assert done.exit_code == 0, done.output
    return [o for o in yaml.safe_load_all(done.output) if o]


def run_gate(
    tmp: Path, objects: list[dict[str, Any]], role: str, rank: int, version: str
) -> subprocess.CompletedProcess[str]:
    """Rank `rank`'s gate as its pod runs it under vLLM `version` (on this machine's CPU platform,
    as the conformance tier runs every release: `cpu_env`), LWS's values and the pod's IP put in."""
    python = venv_for(version) / "bin" / "python"
    config_map, lws = objects[0], objects[1]
    plan = tmp / "plan"
    plan.mkdir(exist_ok=True)
    for name, text in config_map["data"].items():
        (plan / name).write_text(text)
    for name, data in config_map.get("binaryData", {}).items():
        (plan / name).write_bytes(base64.b64decode(data))
    gate = lws["spec"]["leaderWorkerTemplate"][role]["spec"]["initContainers"][0]
    given = {"LWS_LEADER_ADDRESS": "127.0.0.1", "LWS_WORKER_INDEX": str(rank)}
    env = {**os.environ, **given, **cpu_env(version)}
    for item in gate["env"]:
        env[item["name"]] = item.get("value", "127.0.0.1")  # else the pod's IP
    args = [a.replace(PLAN_MOUNT, f"{plan}/") for a in gate["args"]]
    args = [
        a.replace("$(LWS_LEADER_ADDRESS)", "127.0.0.1").replace("$(LWS_WORKER_INDEX)", str(rank))
        for a in args
    ]
    return subprocess.run(
        [str(python), *args], env=env, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.parametrize("version", RELEASES)
def test_each_rank_s_gate_passes_under_the_planned_release(
    version: str, models: dict[str, Path], tmp_path: Path
) -> None:
    objects = exported(tmp_path, version, models["hybrid"])
    for role, rank in (("leaderTemplate", 0), ("workerTemplate", 1)):
        done = run_gate(tmp_path, objects, role, rank, version)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"spark-launch gate: vLLM {version}" in done.stdout


def test_a_gate_refuses_another_release(models: dict[str, Path], tmp_path: Path) -> None:
    if len(RELEASES) < 2:
        pytest.skip("needs two releases")
    planned, other = RELEASES[-1], RELEASES[0]
    objects = exported(tmp_path, planned, models["hybrid"])
    done = run_gate(tmp_path, objects, "workerTemplate", 1, other)
    assert done.returncode == 1
    assert f"(planned {planned})" in done.stderr
    assert "would not start as planned" in done.stderr
