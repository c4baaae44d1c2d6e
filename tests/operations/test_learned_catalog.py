"""A catalog learned from the nodes (a build without a committed one) is a node's answer like any
other: read strictly, each option's flags its own key's, learned from every node and the same on
each, and the keys that load code or open files never rendered unless the spec sets them.

The nodes are this machine (LocalExecutor); a node's vLLM is a fake python that prints the
catalog the test gives that node (`FORGED_CATALOG`), as a forging node would.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.cache import learned_catalog, save_catalog
from launcher.catalogs import CATALOG_DIR
from launcher.core.plan import Plan
from launcher.core.spec.yamlsource import load_document
from launcher.core.vllm.sources import Sources
from launcher.errors import SparkLaunchError
from launcher.node.scripts.learn_catalog import MARKER
from launcher.operations.gathering.head_planning import fleet_for_nodes
from launcher.operations.reporter import Silent
from tests.fakes.local import LocalExecutor
from tests.operations.test_from_head import DEV, build_of, dev_venv, model_dir, spec_data, with_venv


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def committed() -> dict[str, Any]:
    return json.loads((CATALOG_DIR / "vllm-0.33.0.json").read_text())


def forged_prefix_caching() -> dict[str, Any]:
    """The forgery of the report: the plan's own pin of prefix caching renders trust-remote-code."""
    data = committed()
    data["options"]["enable_prefix_caching"] = {
        "flags": ["--trust-remote-code"],
        "kind": "bool",
        "negative": ["--no-trust-remote-code"],
    }
    return data


def nodes_saying(tmp_path: Path, catalogs: dict[str, dict[str, Any]]) -> tuple[Path, LocalExecutor]:
    """A dev venv whose python prints, on each node, the catalog given for it."""
    venv = dev_venv(tmp_path)
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").write_text(
        f'#!/bin/sh\ncat > /dev/null\nprintf "%s" "{MARKER}"\ncat "$FORGED_CATALOG"\necho\n'
    )
    (venv / "bin" / "python").chmod(0o755)
    env = {}
    for node, data in catalogs.items():
        (tmp_path / f"{node}.json").write_text(json.dumps(data))
        env[node] = {"FORGED_CATALOG": str(tmp_path / f"{node}.json")}
    (tmp_path / "home").mkdir(exist_ok=True)
    return venv, LocalExecutor(tmp_path / "home", env)


def for_nodes(tmp_path: Path, venv: Path, executor: LocalExecutor) -> tuple[Plan, Sources]:
    data = with_venv(spec_data(model_dir(tmp_path), DEV), venv)
    document = load_document(yaml.safe_dump(data), str(tmp_path / "s.yaml"))
    fleet, sources = fleet_for_nodes(document, executor, Silent())
    (only,) = fleet.deployments
    return only.plan, sources[only.spec.name]


def test_a_catalog_learned_from_every_node_plans_and_says_where_it_came_from(tmp_path: Path) -> None:
    venv, executor = nodes_saying(tmp_path, {"n1": committed(), "n2": committed()})
    plan, sources = for_nodes(tmp_path, venv, executor)
    assert "--enable-prefix-caching" in plan.nodes[0].argv
    assert sources.learned is not None and "n1, n2" in sources.learned, sources.learned
    assert any("learned from n1, n2's own vLLM" in note for note in plan.notes), plan.notes


def test_a_forged_catalog_mapping_prefix_caching_to_trust_remote_code_is_refused(tmp_path: Path) -> None:
    venv, executor = nodes_saying(tmp_path, {"n1": forged_prefix_caching(), "n2": forged_prefix_caching()})
    with pytest.raises(SparkLaunchError) as caught:
        for_nodes(tmp_path, venv, executor)
    assert "n1" in caught.value.message and "enable_prefix_caching" in caught.value.message
    assert "--trust-remote-code" in caught.value.message, caught.value.message
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing forged is kept


def test_a_node_whose_catalog_differs_is_named(tmp_path: Path) -> None:
    other = committed()
    del other["options"]["enable_prefix_caching"]["negative"]
    venv, executor = nodes_saying(tmp_path, {"n1": committed(), "n2": other})
    with pytest.raises(SparkLaunchError) as caught:
        for_nodes(tmp_path, venv, executor)
    assert "n2" in caught.value.message and "differs from n1's" in caught.value.message, caught.value.message
    assert "enable_prefix_caching" in caught.value.message


def test_a_forged_catalog_in_the_cache_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv, executor = nodes_saying(tmp_path, {"n1": committed(), "n2": committed()})
    save_catalog(DEV, build_of(venv, monkeypatch, tmp_path), forged_prefix_caching(), {"node": "n1"})
    assert learned_catalog(DEV) is None
    plan, _ = for_nodes(tmp_path, venv, executor)  # learned again, from the nodes
    assert "--trust-remote-code" not in plan.nodes[0].argv and "--enable-prefix-caching" in plan.nodes[0].argv


def shapes(option: dict[str, Any]) -> list[dict[str, Any]]:
    """Forgeries of one option's flags, each refused."""
    return [
        {**option, "flags": ["--trust-remote-code"]},
        {**option, "flags": [*option["flags"], "--worker-cls=evil"]},
        {**option, "negative": ["--hf-overrides"]},
        {**option, "flags": ["--enable-prefix-caching x"]},
    ]


@pytest.mark.parametrize("index", range(4))
def test_every_forged_flag_shape_is_refused_when_learned(tmp_path: Path, index: int) -> None:
    data = committed()
    data["options"]["max_model_len"] = shapes(data["options"]["max_model_len"])[index]
    venv, executor = nodes_saying(tmp_path, {"n1": data, "n2": copy.deepcopy(data)})
    with pytest.raises(SparkLaunchError) as caught:
        for_nodes(tmp_path, venv, executor)
    assert "max_model_len" in caught.value.message
