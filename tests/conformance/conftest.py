"""The real vLLM releases we support, in cached venvs; tiny local models; one probe run per release.

Every release with a committed catalog is tested (SPARK_LAUNCH_RELEASES="0.34.0" narrows
the run to the releases named, for adding one). Importing vLLM is slow, so all the
commands a release must resolve go through the shipped probe in ONE batch per release.

How a release's config is resolved on this machine (no GPU): see `cpu_env`. The answers are
those of vLLM's CPU platform, not of a Spark's CUDA platform; the cases compare the plan with
them like with like, and say where the CPU platform decides a value its own way.
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
from launcher.core.rules.base import in_range
from launcher.core.spec.versions import parse
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


def cpu_env(version: str) -> dict[str, str]:
    """The environment a release's parser and config code run under here, a CPU machine.

    - VLLM_TARGET_DEVICE=cpu: the official wheels cannot infer a device without a GPU ("Failed
      to infer device type"); this selects vLLM's CPU platform (`vllm/platforms/__init__.py`,
      `resolve_current_platform_cls_qualname`). Its `check_and_update_config` then sets some
      values its own way, unlike a Spark's CUDA platform: async scheduling always off, no
      CUDA graph sizes and torch.compile in its own mode, MLA's block size (and prefix
      caching), the SSM state dtype by the host's AVX-512 BF16 support; and the defaults
      chosen by device (the batch sizes by device memory and name, the extensible KV cache
      and with it gpu_memory_utilization on 0.34, breakable CUDA graphs for Qwen3.5) take
      their non-CUDA branch.
    - From 0.34, CUDA_VISIBLE_DEVICES="" as well. 0.34's CPU platform refuses every config on
      an x86 host without Triton ("vLLM on x86 CPUs requires Triton (triton-cpu)",
      `CpuPlatform.check_and_update_config`), and triton-cpu is not on the package index. The
      official wheel installs stock triton, which vLLM counts only with exactly one active GPU
      driver (`vllm/triton_utils/importing.py`), so HAS_TRITON is False here, except that
      vLLM keeps it True with no active driver when CUDA_VISIBLE_DEVICES is set and empty
      (its case of a distributed worker whose devices are not visible yet). On 0.34 nothing
      else at config time reads HAS_TRITON on x86 (`uses_standalone_cpu_model_runner` does on
      other CPUs only) nor CUDA_VISIBLE_DEVICES (only --device-ids does): the config is the
      one the CPU platform derives with triton-cpu installed. Not for 0.33: there HAS_TRITON
      chooses the model runner (`VllmConfig` V2 runner needs Triton), so the variable would
      change what 0.33 resolves here.
    """
    env = {"HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}
    if in_range(parse(version), ">=0.34"):
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_probe(venv: Path, jobs: Iterable[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    """Run the shipped probe with a release's own python over a batch of jobs."""
    jobs = list(jobs)
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(unit_file()), "probe", "batch"],
        input="".join(json.dumps(j) + "\n" for j in jobs),
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **cpu_env(version)},
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
    jobs = jobs_of(answers, models)
    answers.results = dict(zip(jobs, run_probe(venv, jobs.values(), version), strict=True))
    return answers


def jobs_of(answers: Answers, models: dict[str, Path]) -> dict[tuple[str, ...], dict[str, Any]]:
    """Every command the release is asked about, by key (its plans kept in `answers`): each node's
    planned command per case, the command without what the plan pinned for an unset setting, the
    refusals' checks, and the field report's hand split. `make release` asks two releases the same."""
    version, venv = answers.version, answers.venv
    jobs: dict[tuple[str, ...], dict[str, Any]] = {}
    for case in cases.PLANS:
        if not cases.planned_on(case, version):
            continue
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
                    cases.check_argv(check, version, venv, models), check.env
                )
    head, worker = cases.hand_split(answers.plans["hybrid"], version)
    jobs[("split", "head")], jobs[("split", "worker")] = resolve_job(head, {}), resolve_job(worker, {})
    return jobs


def resolve_job(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """A probe job: run create_engine_config() on `vllm serve ARGV` under `env`, and bring every
    field of the config back (what `make release` compares between releases)."""
    return {"op": "resolve", "argv": list(argv), "env": env, "dump": True}


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
