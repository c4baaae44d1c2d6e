"""The real vLLM releases we support, in cached venvs; tiny local models; one probe run per release.

Every release with a committed catalog is tested (SPARK_LAUNCH_RELEASES="0.34.0" narrows
the run to the releases named, for adding one). Importing vLLM is slow, so all the
commands a release must resolve go through the shipped probe in ONE batch per release.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from launcher.catalogs import known_versions
from launcher.core.plan import Plan
from launcher.node.scripts.probe import MARKER
from launcher.node.unit import unit_bytes, unit_sha
from tests.conformance import cases
from tests.conformance.models import write_models
from tests.conftest import ROOT

RELEASES = os.environ.get("SPARK_LAUNCH_RELEASES", "").split() or known_versions()
PROBE_SECONDS = 1500  # one release's batch of cases, under pytest's 1800 s a test


@functools.cache
def unit_file() -> Path:
    """The launcher's unit, as a node keeps it: `python UNIT probe ...` runs the probe from it."""
    path = Path(tempfile.mkdtemp(prefix="spark-launch-unit-")) / f"{unit_sha()}.pyz"
    path.write_bytes(unit_bytes())
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


def run_probe(venv: Path, jobs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the probe from the unit with a release's own python over a batch of jobs."""
    jobs = list(jobs)
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(unit_file()), "probe", "batch"],
        input="".join(json.dumps(j) + "\n" for j in jobs),
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"},
        timeout=PROBE_SECONDS,
    )
    results = [
        json.loads(line[len(MARKER) :]) for line in done.stdout.splitlines() if line.startswith(MARKER)
    ]
    assert len(results) == len(jobs), done.stdout[-3000:] + done.stderr[-3000:]
    return results


@dataclass
class Answers:
    """One release's plans of every case, and vLLM's answer to every command sent to it."""

    version: str
    venv: Path
    plans: dict[str, Plan] = field(default_factory=dict)
    results: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)


def collect(version: str, venv: Path, models: dict[str, Path]) -> Answers:
    """Plan every case, build every command, and ask the release about all of them at once."""
    answers = Answers(version, venv)
    jobs: dict[tuple[str, ...], dict[str, Any]] = {}
    for case in cases.PLANS:
        data = cases.spec_data(case, version, venv, models)
        plan = answers.plans[case.id] = cases.plan_data(data)
        for node in plan.nodes:
            jobs[("plan", case.id, str(node.rank))] = resolve_job(list(node.argv[2:]), node.env)
        unset = cases.unset_defaults(case, data, plan)
        if case in cases.DEFAULT_CASES:
            last = plan.nodes[-1]  # a worker where there is one: its command has every flag
            argv = cases.strip(last.argv[2:], cases.catalog_of(data), unset)
            jobs[("unpinned", case.id)] = resolve_job(argv, last.env)
    for refusal in cases.REFUSALS:
        if cases.applies(refusal, version):
            for i, check in enumerate(refusal.checks):
                jobs[("check", refusal.id, str(i))] = resolve_job(
                    cases.check_argv(check, version, venv, models), {}
                )
    head, worker = cases.hand_split(answers.plans["hybrid"], version)
    jobs[("split", "head")], jobs[("split", "worker")] = resolve_job(head, {}), resolve_job(worker, {})
    answers.results = dict(zip(jobs, run_probe(venv, jobs.values()), strict=True))
    return answers


def resolve_job(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """A probe job: run create_engine_config() on `vllm serve ARGV` under `env`."""
    return {"op": "resolve", "argv": list(argv), "env": env}


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model directory per kind: hybrid (with an MTP layer), dense, attention-free, MLA, pooling."""
    return write_models(tmp_path_factory.mktemp("models"), venv_for(RELEASES[0]) / "bin" / "python")


@pytest.fixture(scope="session")
def answers(models: dict[str, Path]) -> Callable[[str], Answers]:
    """Answers(version), computed once per release (one vLLM import for all its commands)."""
    cache: dict[str, Answers] = {}

    def get(version: str) -> Answers:
        if version not in cache:
            cache[version] = collect(version, venv_for(version), models)
        return cache[version]

    return get
