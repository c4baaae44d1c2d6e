"""Every shipped example spec plans, and its plan matches the golden files exactly.

Regenerate after an intended change: pytest tests/core/test_configs.py --update-golden
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from launcher.core.spec.sections import spec_schema
from launcher.core.views import fleet_json, fleet_text, plan_dict
from launcher.load import plan_file, plan_fleet
from tests.conftest import ROOT

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(autouse=True)
def models_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples' models live on their nodes: plan as from a machine without them.

    (The demo's model exists here while the test bed is up; the golden plans must not care.)
    """
    monkeypatch.setattr("launcher.load.local_model_files", lambda spec: None)


def test_there_are_example_configs() -> None:
    assert {p.name for p in CONFIGS} >= {"demo.yaml", "qwen3-next-2x-spark.yaml", "dense-2x-spark.yaml"}


@pytest.mark.parametrize("config", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_plan_matches_golden(config: Path, update_golden: bool) -> None:
    fleet = plan_fleet(config)
    for suffix, text in ((".json", fleet_json(fleet) + "\n"), (".txt", fleet_text(fleet) + "\n")):
        golden = GOLDEN / f"{config.stem}{suffix}"
        if update_golden:
            golden.write_text(text)
        assert golden.exists(), f"no golden file {golden.name}: run pytest --update-golden"
        assert text == golden.read_text(), f"{golden.name} differs: review, then --update-golden"


@pytest.mark.parametrize(
    ("config", "pinned", "absent"),
    [
        ("qwen3-next-2x-spark-v032.yaml", ["--mamba-cache-mode=align", "--enable-prefix-caching"], []),
        ("qwen3-next-2x-spark.yaml", ["--enable-prefix-caching"], ["--mamba-cache-mode"]),
    ],
)
def test_qwen3_next_examples_fix_the_field_failure(config: str, pinned: list[str], absent: list[str]) -> None:
    _, plan = plan_file(ROOT / "configs" / config)
    doc = plan_dict(plan)
    head, worker = doc["nodes"]
    assert worker["argv"][: len(head["argv"]) - 1] == head["argv"][:-1]
    assert worker["argv"][-2:] == ["--node-rank=1", "--headless"]
    for argv in (head["argv"], worker["argv"]):
        assert set(pinned) <= set(argv)
        for prefix in absent:
            assert not any(a.startswith(prefix) for a in argv)
    rows = {d["setting"]: d for d in doc["derived"]}
    assert rows["mamba_cache_mode"]["value"] == "align if the model has mamba layers"
    assert all(d["reason"] for d in doc["derived"])


@pytest.mark.parametrize("config", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_configs_satisfy_the_published_schema(config: Path) -> None:
    jsonschema.validate(yaml.safe_load(config.read_text()), spec_schema())


def test_schema_rejects_unknown_keys() -> None:
    data = json.loads(json.dumps(spec_schema()))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "nodez": []}, data)
