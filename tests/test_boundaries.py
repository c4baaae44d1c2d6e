"""The architecture, checked: the pure core stays pure; click and SSH stay at the edges."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "launcher"
PURE = ["spec", "schema", "plan", "rules", "render", "argv", "views", "catalog", "errors", "yamlsource"]
IMPURE_IMPORTS = {
    "subprocess",
    "socket",
    "time",
    "threading",
    "click",
    "fabric",
    "paramiko",
    "invoke",
    "urllib",
    "http",
    "concurrent",
    "vllm",
    "torch",
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


MODULES = sorted(PACKAGE.glob("*.py"))


@pytest.mark.parametrize("name", PURE)
def test_pure_core_does_no_io(name: str) -> None:
    assert not imports_of(PACKAGE / f"{name}.py") & IMPURE_IMPORTS


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_click_only_in_the_cli_and_ssh_only_in_the_executor(path: Path) -> None:
    found = imports_of(path)
    if path.stem != "cli":
        assert "click" not in found
    if path.stem != "ssh":
        assert not found & {"fabric", "paramiko", "invoke"}


def test_probe_needs_nothing_but_the_standard_library() -> None:
    allowed = set(sys.stdlib_module_names) | {"vllm", "__future__"}
    assert imports_of(PACKAGE / "probe.py") <= allowed
