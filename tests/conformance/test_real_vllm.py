"""The launcher against the REAL vLLM of each supported release (the conformance tier).

- the committed catalogs (flags and model traits) equal what the real packages say;
- for every model kind (hybrid, dense, attention-free, MTP, MLA, pooling), each node's
  create_engine_config() on its own argv and env equals the plan, row by row, and the
  nodes agree on every value `check` compares;
- what the plan pinned while the spec left it unset is what vLLM chooses without the pin;
- every refusal says what the release really does: vLLM refuses, or changes the value,
  for the reason the message gives, and the hint's fix holds;
- the rendered command survives a real shell, and, as a control, the field report's
  hand-split pair really resolves to different mamba cache modes;
- the release machine's committed report (launcher/catalogs/report-X.md) is what this tier's
  own answers of X and of the release before it give.

All of it on vLLM's CPU platform (conftest.cpu_env). What that platform decides its own way is
compared like with like (both nodes here derive it the CPU's way): async scheduling is always
off, and from 0.34 the extensible KV cache is unsupported (so gpu_memory_utilization's 1.0
default and breakable CUDA graphs for Qwen3.5 never show). Those rows are checked here to be
reported and to agree; the values a Spark's CUDA platform derives for them show only on a Spark
(`check` there), and are reviewed from the source in launcher/catalogs/review-X.json.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from launcher.catalogs import CATALOG_DIR
from launcher.core.checks import AGREE
from launcher.core.checks.probe_rows import expected_missing, hash_rows
from launcher.core.plan import PlanProblems
from launcher.core.render import shell_words
from launcher.core.rules.removed import ENV, SPECULATIVE_KEYS
from launcher.core.rules.table import RULES
from launcher.core.spec.versions import parse
from launcher.core.vllm.releases import same_release
from launcher.node.agent import Agent
from launcher.node.scripts.probe import MARKER
from launcher.operations.gathering.head_planning import learn_catalog
from scripts import release_report
from scripts.release import apis as release_apis
from tests.conformance import cases
from tests.conformance.conftest import RELEASES, Answers, cpu_env, unit_file, venv_for
from tests.conftest import base_spec, edit, spec_of
from tests.fakes.local import LocalExecutor

pytestmark = pytest.mark.conformance

# Plan rows that are not config values (node_rank and headless are checked per node).
PLAN_ONLY = {"model", "node_rank", "headless", "per-node env"}
# Plan rows vLLM keeps among the parsed arguments rather than in its config.
ARGUMENTS = {"port", "host"}


def ok(result: dict[str, Any], version: str, what: str) -> dict[str, Any]:
    """The resolved values of a probe result, after checking it ran on the release under test."""
    assert same_release(version, result["vllm_version"]), (
        f"{what}: the probe ran vLLM {result['vllm_version']}, not {version}"
    )
    assert result["ok"], f"{what}: {result.get('error')}"
    resolved: dict[str, Any] = result["resolved"]
    lacking = [k for k in resolved["missing"] if k not in expected_missing(version)]
    assert lacking == [], f"{what}: this vLLM has no field for {lacking}"
    return resolved


@pytest.mark.parametrize("version", RELEASES)
def test_the_catalog_a_node_learns_from_its_own_vllm_is_the_committed_one(
    version: str, tmp_path: Path
) -> None:
    """Through the launcher's own path (the node script sent to the node's vLLM python, its answer
    read back), with this machine as the node: the same as `make catalogs` committed."""
    spec = spec_of(edit(base_spec(version), **{"vllm.venv": str(venv_for(version))}))
    (tmp_path / "home").mkdir()
    learned = learn_catalog(Agent(LocalExecutor(tmp_path / "home"), spec.name, spec.head.name), spec)
    committed = json.loads((CATALOG_DIR / f"vllm-{version}.json").read_text())
    del committed["generated_by"]  # the file's provenance: not part of what a node's vLLM says
    assert learned == committed, "catalog is stale: run `make catalogs`"


# The plans of every release: every case, but a shipped example on the release it names only.
PLANNED = [(v, c) for v in RELEASES for c in cases.PLANS if cases.planned_on(c, v)]
PLANNED_IDS = [f"{v}-{c.id}" for v, c in PLANNED]


@pytest.mark.parametrize(("version", "case"), PLANNED, ids=PLANNED_IDS)
def test_vllms_own_config_hash_agrees_across_the_nodes_of_every_plan(
    answers: Callable[[str], Answers], version: str, case: cases.Case
) -> None:
    got = answers(version)
    resolved = {
        n.name: ok(got.results[("plan", case.id, str(n.rank))], version, f"{case.id}/{n.name}")
        for n in got.plans[case.id].nodes
    }
    (row,) = hash_rows(resolved)
    assert row.ok, f"{case.id}: {row.values} {row.hint}"


@pytest.mark.parametrize("version", RELEASES)
def test_the_hash_row_fails_for_the_hand_split_and_names_what_differs(
    answers: Callable[[str], Answers], version: str
) -> None:
    got = answers(version)
    head = ok(got.results[("split", "head")], version, "head")
    worker = ok(got.results[("split", "worker")], version, "worker")
    (row,) = hash_rows({"head": head, "worker": worker})
    assert not row.ok
    for field in ("cache_config.enable_prefix_caching", "cache_config.mamba_cache_mode"):
        assert field in (row.hint or ""), row.hint


@pytest.mark.parametrize(("version", "case"), PLANNED, ids=PLANNED_IDS)
def test_every_node_resolves_to_the_plan(
    answers: Callable[[str], Answers], version: str, case: cases.Case
) -> None:
    got = answers(version)
    plan = got.plans[case.id]
    per_node = []
    for node in plan.nodes:
        result = got.results[("plan", case.id, str(node.rank))]
        resolved = ok(result, version, f"{case.id}/{node.name}")
        per_node.append(resolved)
        assert resolved["node_rank"] == node.rank
        assert result["args"]["headless"] == (node.rank > 0)
        for row in plan.derived:
            if row.setting in PLAN_ONLY:
                continue
            actual = result["args"] if row.setting in ARGUMENTS else resolved
            assert row.setting in actual, f"plan row {row.setting}: the probe does not report it"
            assert actual[row.setting] == row.value, f"{case.id}/{node.name}: {row.setting}"
    for key in AGREE:
        values = {json.dumps(r[key], default=str) for r in per_node}
        assert len(values) == 1, f"{case.id}: {key} differs across nodes: {values}"


@pytest.mark.parametrize("case", cases.DEFAULT_CASES, ids=[c.id for c in cases.DEFAULT_CASES])
@pytest.mark.parametrize("version", RELEASES)
def test_pinned_defaults_are_the_releases_own_choice(
    answers: Callable[[str], Answers], version: str, case: cases.Case
) -> None:
    """Leave out what the plan pinned for an unset setting: vLLM must choose the same by itself."""
    got = answers(version)
    plan = got.plans[case.id]
    resolved = ok(got.results[("unpinned", case.id)], version, case.id)
    unset = [k for k in cases.DEFAULTED if k not in case.serve and k in {d.setting for d in plan.derived}]
    assert unset, f"{case.id}: the plan pins nothing the spec left unset"
    for key in unset:
        assert resolved[key] == plan.value(key), f"{case.id}: {key}"


REFUSING = [(v, r) for v in RELEASES for r in cases.REFUSALS if cases.applies(r, v)]


@pytest.mark.parametrize(("version", "refusal"), REFUSING, ids=[f"{v}-{r.id}" for v, r in REFUSING])
def test_every_refusal_says_what_the_release_does(
    answers: Callable[[str], Answers], models: dict[str, Any], version: str, refusal: cases.Refusal
) -> None:
    """Each refusal the plan makes for a release (only where that release refuses it)."""
    got = answers(version)
    case = cases.Case(refusal.id, refusal.kind, refusal.serve, env=refusal.env)
    data = cases.spec_data(case, version, got.venv, models)
    with pytest.raises(PlanProblems) as caught:
        cases.plan_data(data)
    (problem,) = [p for p in caught.value.problems if ".".join(p.path) == refusal.path]
    assert refusal.words in problem.message
    assert refusal.hint is None or refusal.hint in (problem.hint or "")
    for i, check in enumerate(refusal.checks):
        result = got.results[("check", refusal.id, str(i))]
        what = f"{refusal.id} check {i}"
        if check.error is not None:
            assert same_release(version, result["vllm_version"])
            assert not result["ok"] and check.error in result["error"], f"{what}: {result.get('error')}"
        else:
            resolved = ok(result, version, what)
            assert {k: resolved[k] for k in check.resolved} == check.resolved, what


@pytest.mark.parametrize("version", RELEASES)
def test_rendered_command_survives_a_real_shell(answers: Callable[[str], Answers], version: str) -> None:
    got = answers(version)
    node = got.plans["hostile"].nodes[1]
    probe = shell_words([str(got.venv / "bin" / "python"), str(unit_file()), "probe", "parse"])
    done = subprocess.run(
        ["bash", "-c", f"{probe} {shell_words(node.argv[2:])}"],
        capture_output=True,
        text=True,
        check=False,
        env={**cpu_env(version), "PATH": "/usr/bin:/bin"},
    )
    (out,) = [json.loads(x[len(MARKER) :]) for x in done.stdout.splitlines() if x.startswith(MARKER)]
    assert out["ok"], out.get("error")
    assert out["args"]["served_model_name"] == [cases.HOSTILE_NAME]
    assert out["args"]["chat_template"] == cases.HOSTILE_TEMPLATE
    assert out["args"]["node_rank"] == 1 and out["args"]["headless"] is True


@pytest.mark.parametrize("version", RELEASES)
def test_hand_split_inputs_really_diverge(answers: Callable[[str], Answers], version: str) -> None:
    """The control: the field report's split (prefix caching on one node only) resolves apart."""
    got = answers(version)
    a = ok(got.results[("split", "head")], version, "head")
    b = ok(got.results[("split", "worker")], version, "worker")
    assert (a["mamba_cache_mode"], b["mamba_cache_mode"]) == ("align", "none")
    assert a["mamba_block_size"] != b["mamba_block_size"]


REPORTED = [
    (v, b)
    for v in RELEASES
    if release_report.report_file(v).is_file()
    and (b := json.loads(release_report.review_file(v).read_text())["baseline"]) in RELEASES
]


@pytest.mark.parametrize(("version", "baseline"), REPORTED, ids=[f"{b}-{v}" for v, b in REPORTED])
def test_the_release_machines_report_is_reproduced(
    answers: Callable[[str], Answers], models: dict[str, Path], version: str, baseline: str
) -> None:
    """`make release` resolves the commands this tier resolves: the committed report, rebuilt from
    this tier's own answers of both releases, is the same, and every change in it is covered."""
    results = {v: {"/".join(k): r for k, r in answers(v).results.items()} for v in (baseline, version)}
    catalogs = {v: json.loads((CATALOG_DIR / f"vllm-{v}.json").read_text()) for v in (baseline, version)}
    found = {v: release_apis(v, venv_for(v) / "bin" / "python") for v in (baseline, version)}
    roots = [str(models["hybrid"].parent)]
    entries = release_report.read_entries(version)
    report = release_report.build(version, baseline, results, catalogs, found, roots, entries)
    assert report.ok, report.problems
    committed = release_report.report_file(version).read_text()
    assert release_report.render(report) == committed, f"run `make release VERSION={version}`"


def cited(mirrors: str) -> list[tuple[str, list[str]]]:
    """The (file, names) a rule's source cites: "vllm/x.py (A.b, c: why); vllm/y.py (d)"."""
    out = []
    for part in mirrors.split("; "):
        path, _, inner = part.partition(" (")
        names = [n.split(":")[0].strip().split(".")[-1] for n in inner.rstrip(")").split(", ")]
        out.append((path.strip(), [n for n in names if n]))
    return out


def test_every_rule_cites_what_is_in_the_newest_release() -> None:
    """Each rule's source (and each refused input's) is a file of the newest release under test,
    holding every function or field it names."""
    newest = max(RELEASES, key=parse)
    site = next((venv_for(newest) / "lib").glob("python3*/site-packages"))
    sources = [r.mirrors for r in RULES] + [e.source for e in (*ENV, *SPECULATIVE_KEYS)]
    for mirrors in sources:
        for path, names in cited(mirrors):
            source = site / path
            assert source.is_file(), f"{mirrors}: no {path} in vLLM {newest}"
            text = source.read_text()
            for name in names:
                assert re.search(rf"\b{re.escape(name)}\b", text), f"{mirrors}: no {name} in {path}"
