"""The slips of a first spec, refused by `validate` with a pinned message and hint each:
clashing ports, values outside the release's own ranges and choices, keys the runtime
ignores, a top-level key indented under another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launcher.catalogs import load_catalog
from launcher.core.vllm.argv import BadValue, check_value
from launcher.core.vllm.catalog import Bounds
from launcher.errors import SpecError
from launcher.load import plan_file
from tests.conftest import base_spec, edit, write
from tests.core.spec.test_spec_errors import BASE, CASES

DOCKER = {"vllm.runtime": "docker", "vllm.image": "nvcr.io/nvidia/vllm:26.05-py3"}


def report(tmp_path: Path, data: dict[str, Any]) -> list[str]:
    """Each problem as `key.path: message (hint)`."""
    with pytest.raises(SpecError) as caught:
        plan_file(write(tmp_path, data))
    return [f"{p.dotted}: {p.message} ({p.hint})" for p in caught.value.problems]


SLIPS = [
    (
        {"serve.port": 8000, "serve.master_port": 8000},
        "serve.port: 8000 is also master_port (the spec's): two listeners cannot share a port "
        "(give port and master_port different ports, e.g. port: 8001)",
    ),
    (
        {"serve.port": 29501},
        "serve.port: 29501 is also master_port (vLLM's default): two listeners cannot share "
        "a port (give port and master_port different ports, e.g. port: 29502)",
    ),
    (
        {"serve.port": 8000, "serve.grpc_port": 8000},
        "serve.port: 8000 is also grpc_port (the spec's): two listeners cannot share a port "
        "(give port and grpc_port different ports, e.g. port: 8001)",
    ),
    (
        {"serve.gpu_memory_utilization": 85},
        "serve.gpu_memory_utilization: 85 is outside (0, 1] "
        "(a fraction of the GPU's memory, not a percentage: 0.85 for 85%)",
    ),
    (
        {"serve.gpu_memory_utilization": 0},
        "serve.gpu_memory_utilization: 0 is outside (0, 1] "
        "(vLLM's config keeps --gpu-memory-utilization in (0, 1])",
    ),
    (
        {"serve.max_loras": 0},
        "serve.max_loras: must be >= 1, got 0 (vLLM's config keeps --max-loras >= 1)",
    ),
    (
        {"serve.dtype": "bfloat17"},
        "serve.dtype: 'bfloat17' is not one of auto, bfloat16, float, float16, float32, half "
        "(did you mean 'bfloat16'?)",
    ),
    (
        {"vllm.image": "nvcr.io/nvidia/vllm:26.05-py3"},
        "vllm.image: is only used with runtime docker; runtime venv ignores it "
        "(remove it, or set vllm.runtime: docker)",
    ),
    (
        {**DOCKER, "vllm.venv": "/opt/vllm"},
        "vllm.venv: is only used with runtime venv; runtime docker ignores it "
        "(remove it, or set vllm.runtime: venv)",
    ),
    (
        {"model.venv": "/opt/vllm"},
        "model.venv: 'venv' is a key of vllm, not of model "
        "(check the indentation: `venv:` belongs under `vllm:`)",
    ),
]


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
@pytest.mark.parametrize(("changes", "expected"), SLIPS, ids=[s[1].split(":")[0] + s[1][-12:] for s in SLIPS])
def test_validate_refuses_the_slip_with_its_hint(
    tmp_path: Path, version: str, changes: dict[str, Any], expected: str
) -> None:
    data = edit(BASE, **{"vllm.version": version, **changes})
    assert report(tmp_path, data) == [expected]


def test_a_serve_block_indented_under_model_is_told_to_check_the_indentation(tmp_path: Path) -> None:
    data = base_spec()
    data["model"] = {"path": "/models/m", "hybrid": True, "serve": data.pop("serve")}
    found = report(tmp_path, data)
    assert (
        "model.serve: 'serve' is a top-level key, not of model "
        "(check the indentation: `serve:` belongs at the start of its line)"
    ) in found
    assert not any("did you mean" in line for line in found)
    assert len(found) == 1  # not also what planning without a serve section would say


def test_a_misspelt_key_still_gets_did_you_mean(tmp_path: Path) -> None:
    assert report(tmp_path, edit(BASE, **{"model.served_nam": "x"})) == [
        "model.served_nam: unknown key 'served_nam' (did you mean 'served_name'?)"
    ]


def test_the_ranges_are_the_release_catalogs_own() -> None:
    option = load_catalog("0.33.0").options["gpu_memory_utilization"]
    assert option.bounds == Bounds(gt=0, le=1)
    check_value(option, 1)
    check_value(option, 0.85)
    with pytest.raises(BadValue, match=r"1\.01 is outside \(0, 1\]"):
        check_value(option, 1.01)


@pytest.mark.parametrize(
    ("bounds", "text"),
    [
        (Bounds(gt=0, le=1), "(0, 1]"),
        (Bounds(ge=1, le=65535), "[1, 65535]"),
        (Bounds(ge=0.0, lt=1.0), "[0, 1)"),
        (Bounds(gt=0), "> 0"),
        (Bounds(ge=-1), ">= -1"),
        (Bounds(lt=3), "< 3"),
        (Bounds(le=2.5), "<= 2.5"),
    ],
)
def test_a_range_reads_as_people_write_it(bounds: Bounds, text: str) -> None:
    assert bounds.text == text


def test_every_refusal_comes_with_a_hint(tmp_path: Path) -> None:
    hintless = []
    for changes, _, _ in CASES + [(c, "", "") for c, _ in SLIPS]:
        try:
            plan_file(write(tmp_path, edit(BASE, **changes)))
        except SpecError as exc:
            hintless += [f"{p.dotted}: {p.message}" for p in exc.problems if not p.hint]
    assert hintless == []
