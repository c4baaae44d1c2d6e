"""The layers, checked: each package imports only what its layer may, and the core does no I/O.

    errors  <-  core  <-  node  <-  commands  <-  cli
                  ^-- load, catalogs (the planning path's file reads)

The core turns values into values (no environment, files, printing, clock, subprocess,
sockets), the node side never reaches up into the commands, only the cli imports click,
and only node/ssh.py imports fabric/paramiko.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "launcher"
ALL = sorted(PACKAGE.rglob("*.py"))
SCRIPTS = PACKAGE / "node" / "scripts"

# Modules through which a program touches the world (or the clock).
WORLDLY = {
    "asyncio",
    "concurrent",
    "datetime",
    "http",
    "io",
    "logging",
    "os",
    "pathlib",
    "random",
    "secrets",
    "select",
    "shutil",
    "signal",
    "socket",
    "subprocess",
    "sys",
    "tempfile",
    "threading",
    "time",
    "urllib",
    "click",
    "fabric",
    "invoke",
    "paramiko",
    "prometheus_client",
    "torch",
    "vllm",
}
WORLDLY_CALLS = {"print", "open", "input", "exec", "eval", "breakpoint", "__import__"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, by its full dotted name (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module or ""]).strip(".")
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names)
    return names


def launcher_imports(path: Path) -> set[str]:
    return {n for n in imports_of(path) if n.split(".")[0] == "launcher"}


def in_package(path: Path, package: str) -> bool:
    return module_name(path) == package or module_name(path).startswith(package + ".")


def files_of(package: str) -> list[Path]:
    return [p for p in ALL if in_package(p, package)]


def ids(paths: list[Path]) -> list[str]:
    return [module_name(p) for p in paths]


def allowed(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages) or name in ("launcher",)


CORE = files_of("launcher.core")


@pytest.mark.parametrize("path", CORE, ids=ids(CORE))
def test_the_core_imports_only_itself_and_errors(path: Path) -> None:
    outside = {n for n in launcher_imports(path) if not allowed(n, "launcher.core", "launcher.errors")}
    assert not outside, f"{module_name(path)} reaches out of the core: {sorted(outside)}"


@pytest.mark.parametrize("path", CORE, ids=ids(CORE))
def test_the_core_does_no_io(path: Path) -> None:
    worldly = {n for n in imports_of(path) if n.split(".")[0] in WORLDLY}
    calls = {
        node.func.id
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in WORLDLY_CALLS
    }
    assert not worldly and not calls, f"{module_name(path)}: {sorted(worldly | calls)}"


def test_importing_the_whole_core_loads_nothing_worldly() -> None:
    """Through everything it imports (yaml included): no subprocess, socket, thread or network code."""
    modules = [module_name(p) for p in CORE]
    code = (
        "import sys\n"
        f"for m in {modules!r}: __import__(m)\n"
        "bad = {'subprocess', 'socket', 'threading', 'http.client', 'urllib.request', 'concurrent.futures',\n"
        "       'click', 'fabric', 'paramiko', 'prometheus_client', 'vllm', 'torch'} & set(sys.modules)\n"
        "upper = ('launcher.node', 'launcher.commands', 'launcher.cli', 'launcher.load',\n"
        "         'launcher.catalogs')\n"
        "bad |= {m for m in sys.modules if m.startswith(upper)}\n"
        "print(sorted(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def test_every_package_folder_is_a_package() -> None:
    """Folders without __init__.py would import here but be left out of a built wheel."""
    folders = {p.parent for p in ALL} - {PACKAGE}
    assert [str(f.relative_to(ROOT)) for f in sorted(folders) if not (f / "__init__.py").exists()] == []


def test_errors_is_the_bottom_layer() -> None:
    assert launcher_imports(PACKAGE / "errors.py") == set()


NODE = files_of("launcher.node")


@pytest.mark.parametrize("path", NODE, ids=ids(NODE))
def test_the_node_side_never_reaches_up_to_commands_or_cli(path: Path) -> None:
    up = {
        n for n in launcher_imports(path) if allowed(n, "launcher.commands", "launcher.cli", "launcher.load")
    }
    assert not up, f"{module_name(path)}: {sorted(up)}"


COMMANDS = files_of("launcher.commands")


@pytest.mark.parametrize("path", COMMANDS, ids=ids(COMMANDS))
def test_commands_never_import_the_cli(path: Path) -> None:
    assert not {n for n in launcher_imports(path) if allowed(n, "launcher.cli")}


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_click_only_in_the_cli_and_ssh_only_in_node_ssh(path: Path) -> None:
    roots = {n.split(".")[0] for n in imports_of(path)}
    if not in_package(path, "launcher.cli"):
        assert "click" not in roots
    if module_name(path) != "launcher.node.ssh":
        assert not roots & {"fabric", "paramiko", "invoke"}


NODE_SCRIPTS = sorted(p for p in SCRIPTS.glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", NODE_SCRIPTS, ids=[p.stem for p in NODE_SCRIPTS])
def test_node_scripts_need_nothing_but_the_standard_library(path: Path) -> None:
    extra = {"vllm"} if path.stem == "probe" else set()
    # Other node scripts (libraries, or a script it borrows from) are inlined by bundle().
    roots = {n.split(".")[0] for n in imports_of(path) if not n.startswith("launcher.node.scripts.")}
    assert roots <= set(sys.stdlib_module_names) | {"__future__"} | extra


def test_every_node_script_is_a_script_or_a_library() -> None:
    from launcher.node.scripts import LIBRARIES, NAMES

    assert {p.stem for p in NODE_SCRIPTS} == set(NAMES) | set(LIBRARIES)


@pytest.mark.parametrize(
    "name",
    [p.stem for p in NODE_SCRIPTS if p.stem not in ("common", "inputs", "installed", "memory", "probe")],
)
def test_each_node_script_is_sent_whole_and_compiles_alone(name: str) -> None:
    from launcher.node.scripts import bundle

    source = bundle(name)
    compile(source, f"<{name} as sent>", "exec")
    assert "launcher" not in {n.split(".")[0] for n in _imports_in(source)}


def _imports_in(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_status_poll_sends_only_what_it_needs() -> None:
    from launcher.node.scripts import bundle

    poll = bundle("status")
    for other in ("def start(", "def stop(", "def facts(", "def listen(", "def lock("):
        assert other not in poll
