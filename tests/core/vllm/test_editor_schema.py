"""`spark-launch schema` describes `serve` per release, from its catalog: an editor checks the
section where typos happen (option names, types, ranges, choices) as it is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from launcher.catalogs import known_versions, load_catalog
from launcher.core.views import editor_schema
from tests.conftest import ROOT, base_spec, edit
from tests.invoke import invoke

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
SCHEMA = editor_schema([load_catalog(v) for v in known_versions()])


def errors(data: dict[str, Any], schema: dict[str, Any] = SCHEMA) -> list[str]:
    """Each schema error as `dotted.path: message`."""
    found = jsonschema.Draft202012Validator(schema).iter_errors(data)
    return sorted(".".join(map(str, e.absolute_path)) + ": " + e.message for e in found)


@pytest.mark.parametrize("config", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_example_spec_satisfies_the_schema(config: Path) -> None:
    assert errors(yaml.safe_load(config.read_text())) == []


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
@pytest.mark.parametrize(
    ("serve", "expected"),
    [
        ({"gpu_memory_utilization": 85}, "serve.gpu_memory_utilization: 85 is greater than the maximum of 1"),
        (
            {"gpu_memory_utilization": 0},
            "serve.gpu_memory_utilization: 0 is less than or equal to the minimum of 0",
        ),
        ({"dtype": "bfloat17"}, "serve.dtype: 'bfloat17' is not one of"),
        ({"enforce_eager": "yes"}, "serve.enforce_eager: 'yes' is not of type 'boolean'"),
        ({"port": 70000}, "serve.port: 70000 is greater than the maximum of 65535"),
        ({"max_model_len": "big"}, "serve.max_model_len: 'big' is not valid under any of the given schemas"),
        (
            {"enable_prefix_cache": True},
            "serve: Additional properties are not allowed ('enable_prefix_cache'",
        ),
        ({"node_rank": 1}, "serve: Additional properties are not allowed ('node_rank'"),
        ({"api_key": "x"}, "serve: Additional properties are not allowed ('api_key'"),
    ],
)
def test_the_schema_marks_what_validate_refuses(version: str, serve: dict[str, Any], expected: str) -> None:
    data = edit(base_spec(version), **{f"serve.{k}": v for k, v in serve.items()})
    found = errors(data)
    assert any(line.startswith(expected) for line in found), found


def test_serve_is_the_releases_own() -> None:
    only_033 = {"monokernel": True}  # an option 0.33.0 has and 0.32.0 does not
    assert errors(edit(base_spec("0.33.0"), **{"serve.monokernel": True})) == []
    assert errors(edit(base_spec("0.32.0"), **{f"serve.{k}": v for k, v in only_033.items()})) == [
        "serve: Additional properties are not allowed ('monokernel' was unexpected)"
    ]
    borrowed = edit(base_spec("0.33.0"), **{"vllm.version": "0.34.0", "vllm.flags_from": "0.32.0"})
    assert errors(edit(borrowed, **{"serve.monokernel": True})) != []  # flags_from decides


def test_choices_of_an_integer_option_are_integers() -> None:
    rank = SCHEMA["$defs"]["serve-0.33.0"]["properties"]["max_lora_rank"]
    assert 16 in rank["enum"] and "16" not in rank["enum"]


def test_the_cli_prints_it_and_can_pin_one_release() -> None:
    pinned = json.loads(invoke(["schema", "--release", "0.32.0"]).output)
    assert pinned["properties"]["serve"] == {"$ref": "#/$defs/serve-0.32.0"} and "allOf" not in pinned
    assert json.loads(invoke(["schema"]).output) == json.loads(json.dumps(SCHEMA))
    refused = invoke(["schema", "--release", "0.99.0"])
    assert refused.exit_code == 2 and "'0.99.0' is not one of '0.32.0', '0.33.0', '0.34.0'." in refused.stderr
