"""The real vLLM releases we support, in cached venvs, and a local hybrid model (no weights)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from launcher.node.scripts import bundle
from launcher.node.scripts.probe import MARKER
from tests.conftest import ROOT

VERSIONS = ["0.32.0", "0.33.0"]


@functools.cache
def probe_file() -> Path:
    """The probe as it is sent to a node (its libraries inlined), as a file to run."""
    path = Path(tempfile.mkdtemp(prefix="spark-launch-probe-")) / "probe.py"
    path.write_text(bundle("probe"))
    return path


def venv_for(version: str) -> Path:
    """The venv holding vLLM `version`: $SPARK_LAUNCH_VLLM_0_33_0, else the cached build."""
    override = os.environ.get("SPARK_LAUNCH_VLLM_" + version.replace(".", "_"))
    if override:
        return Path(override)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "vllm-venv.sh"), version],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"cannot build the vLLM {version} venv:\n{done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session", params=VERSIONS)
def vllm(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(version, venv) for each supported release; never skipped: a missing venv fails."""
    return request.param, venv_for(request.param)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hybrid Qwen3-Next config.json and tokenizer, written locally."""
    from testbed.model import write_model

    model = tmp_path_factory.mktemp("tiny-qwen3-next")
    write_model(model, venv_for(VERSIONS[0]) / "bin" / "python")
    return model


def run_probe(venv: Path, jobs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the shipped probe with a release's own python over a batch of jobs."""
    jobs = list(jobs)
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(probe_file()), "batch"],
        input="".join(json.dumps(j) + "\n" for j in jobs),
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"},
        timeout=1200,
    )
    results = [
        json.loads(line[len(MARKER) :]) for line in done.stdout.splitlines() if line.startswith(MARKER)
    ]
    assert len(results) == len(jobs), done.stdout[-3000:] + done.stderr[-3000:]
    return results
