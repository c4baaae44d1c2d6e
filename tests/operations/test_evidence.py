"""Evidence taken from the nodes is data: a forged `stacks` answer never chooses a path on this
machine, never makes the launcher read a file outside its state folder, and never ends
`supervise` (a failure to capture is reported, and supervision goes on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launcher.core.answers.read import flat_name, is_run_id
from launcher.core.plan import build_plan
from launcher.core.vllm.models import kind_facts
from launcher.load import catalog_for
from launcher.node.cluster import Cluster, new_run_id
from launcher.operations.evidence import capture
from launcher.operations.receipt_store import OutsideState, add_evidence, runs_dir
from tests.conftest import base_spec, spec_of
from tests.fakes.executor import ScriptedExecutor

RUN = "20260101-120000-abcd"


def answer(**changes: Any) -> dict[str, Any]:
    """A well-formed stacks answer, changed as a forging node would."""
    found = {
        "ok": True,
        "run_id": RUN,
        "py_spy": None,
        "hint": None,
        "ptrace": "root",
        "processes": [],
        "python_pids": [],
        "files": {"log-tail.txt": "/home/u/.spark-launch/t/n1/evidence/x/log-tail.txt"},
        "texts": {"log-tail.txt": "(the last lines)\n"},
    }
    return {**found, **changes}


def forged(stacks: dict[str, Any]) -> Cluster:
    spec = spec_of(base_spec("0.32.0", nodes=2))
    plan = build_plan(spec, kind_facts("hybrid", "test"), catalog_for(spec))
    return Cluster(spec, plan, ScriptedExecutor({("*", "stacks"): lambda w: stacks}))


def every_file(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "run_id",
    ["../../../../outside", "/ABSOLUTE/outside", "..", "20260101-120000-abcd/../../../outside"],
)
def test_a_forged_run_id_never_chooses_where_evidence_is_written(
    run_id: str, tmp_path: Path, state_home: Path
) -> None:
    stacks = answer(run_id=run_id.replace("/ABSOLUTE", str(tmp_path)))
    found = capture(forged(stacks), "wedged", {})
    written = every_file(tmp_path)
    assert written and all(p.is_relative_to(state_home) for p in written), written
    assert found.run_id is None  # the launcher's own run id: supervise did not say one
    assert all(Path(f).parent.parent.parent.name == "unknown" for f in found.files), found.files


def test_the_run_id_is_the_launchers_own_never_the_nodes(state_home: Path) -> None:
    found = capture(forged(answer(run_id="20991231-235959-ffff")), "wedged", {}, RUN)
    assert found.run_id == RUN
    assert all(f"/runs/{RUN}/evidence/" in f for f in found.files), found.files


def test_names_from_a_node_are_flattened_into_the_evidence_folder(state_home: Path) -> None:
    stacks = answer(texts={"plugin/evil.vim": "x\n", "ok.txt": "y\n"})
    found = capture(forged(stacks), "wedged", {}, RUN)
    names = sorted(Path(f).name for f in found.files)
    assert names == ["n1-ok.txt", "n1-plugin_evil.vim", "n2-ok.txt", "n2-plugin_evil.vim"]
    folders = {Path(f).parent for f in found.files}
    assert len(folders) == 1 and folders.pop().parent.name == "evidence"


@pytest.mark.parametrize("run_id", [None, RUN])
@pytest.mark.parametrize(
    "stacks",
    [
        {k: v for k, v in answer().items() if k != "run_id"},  # an answer without its run id
        answer(run_id="\ud800"),  # a lone surrogate: no file name can hold it
        answer(texts={"log-tail.txt": "a lone \ud800 surrogate\n"}),
        answer(texts={"\ud800.txt": "x\n"}),
    ],
    ids=["no-run-id", "surrogate-run-id", "surrogate-text", "surrogate-name"],
)
def test_an_odd_answer_is_captured_or_named_never_a_crash(
    stacks: dict[str, Any], run_id: str | None, state_home: Path
) -> None:
    found = capture(forged(stacks), "wedged", {}, run_id)
    assert found.run_id == run_id
    assert set(found.entry["nodes"]) == {"n1", "n2"}
    assert all(Path(f).is_relative_to(state_home) for f in found.files)
    json.dumps(found.entry)  # what the receipt keeps


@pytest.mark.parametrize("run_id", ["../../outside", "/ABSOLUTE/outside", "\ud800", "x"])
def test_evidence_goes_only_into_a_receipt_of_the_launchers_own_format(
    run_id: str, tmp_path: Path, state_home: Path
) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"format": 1, "secret": "read me"}))
    cluster = forged(answer())
    runs_dir(cluster.spec.name).mkdir(parents=True)
    assert add_evidence(cluster, run_id.replace("/ABSOLUTE", str(tmp_path)), {"why": "x"}) is False
    assert json.loads(outside.read_text()) == {"format": 1, "secret": "read me"}  # not rewritten
    assert every_file(state_home) == []


def test_the_launchers_run_ids_are_of_the_format_it_checks_nodes_against() -> None:
    assert is_run_id(new_run_id()) and not is_run_id(f"{new_run_id()}/..") and not is_run_id("unknown")


@pytest.mark.parametrize(
    ("name", "flat"),
    [
        ("n1-stacks.txt", "n1-stacks.txt"),
        ("../x", "_x"),
        ("..", "_"),
        ("a/b", "a_b"),
        ("\ud800", "_"),
        ("", "_"),
    ],
)
def test_a_name_from_a_node_becomes_one_plain_part(name: str, flat: str) -> None:
    assert flat_name(name) == flat


def test_a_link_in_the_state_folder_leading_out_is_refused_never_followed(
    tmp_path: Path, state_home: Path
) -> None:
    cluster = forged(answer())
    runs_dir(cluster.spec.name).mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (runs_dir(cluster.spec.name) / RUN).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutsideState) as caught:
        capture(cluster, "wedged", {}, RUN)
    assert "it is not inside" in caught.value.message
    assert list((tmp_path / "elsewhere").iterdir()) == []
