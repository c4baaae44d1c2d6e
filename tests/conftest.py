"""Shared fixtures: spec builders for the fast tier, and the golden-file switch."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/* from the current output instead of comparing",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def base_spec(version: str = "0.32.0", nodes: int = 2) -> dict[str, Any]:
    """A valid two-node hybrid deployment as plain data; tests change what they need."""
    return {
        "name": "t",
        "vllm": {"version": version, "runtime": "venv", "venv": "/opt/vllm"},
        "nodes": [
            {"name": f"n{i + 1}", "ssh": f"n{i + 1}", "address": f"10.0.0.{i + 1}", "interface": "eth0"}
            for i in range(nodes)
        ],
        "model": {"path": "/models/m", "hybrid": True},
        "serve": {"tensor_parallel_size": nodes, "enable_prefix_caching": True, "max_model_len": 4096},
    }


def edit(data: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of `data` with dotted keys set (value None deletes): edit(d, **{"serve.port": 1})."""
    out = copy.deepcopy(data)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node: Any = out
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = value
        elif value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def write(tmp_path: Path, data: dict[str, Any], name: str = "spec.yaml") -> Path:
    """Write spec data as YAML, keys in the order given."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
