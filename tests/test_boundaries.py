"""The layers, checked: one test per rule, each naming every module that breaks it.

    errors  <-  core  <-  node  <-  operations  <-  commands  <-  cli
                  ^-- load, cache, catalogs (this machine's reads on the planning path)

The core turns values into values (no environment, files, printing, clock, subprocess,
sockets); each layer imports only those below it; a verb imports no other verb (what verbs
share is in operations); only the command line imports click, and only node/ssh.py imports
fabric/paramiko; no two modules of the package share a name.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
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

# Each layer, and the launcher packages and modules it may import besides its own.
LAYERS = {
    "launcher.core": ("launcher.errors",),
    "launcher.node": ("launcher.core", "launcher.errors"),
    "launcher.operations": (
        "launcher.node",
        "launcher.core",
        "launcher.errors",
        "launcher.load",
        "launcher.cache",
        "launcher.catalogs",
    ),
    "launcher.commands": (
        "launcher.operations",
        "launcher.node",
        "launcher.core",
        "launcher.errors",
        "launcher.load",
        "launcher.cache",
        "launcher.catalogs",
    ),
}


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


def within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def files_of(package: str) -> list[Path]:
    return [p for p in ALL if within(module_name(p), package)]


CORE = files_of("launcher.core")
OUTSIDE_THE_NODE_UNIT = [p for p in ALL if not within(module_name(p), "launcher.node.scripts")]


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_layer_imports_only_itself_and_the_layers_below(layer: str) -> None:
    allowed = (layer, *LAYERS[layer])
    offenders = {
        module_name(p): sorted(n for n in launcher_imports(p) if n != "launcher" and not within(n, *allowed))
        for p in files_of(layer)
    }
    assert {m: names for m, names in offenders.items() if names} == {}


def test_errors_is_the_bottom_layer() -> None:
    assert launcher_imports(PACKAGE / "errors.py") == set()


def test_a_verb_imports_no_other_verb() -> None:
    """What two verbs share belongs in launcher.operations, below both."""
    verbs = files_of("launcher.commands")
    offenders = {
        module_name(p): sorted(
            n for n in launcher_imports(p) if within(n, "launcher.commands") and not within(n, module_name(p))
        )
        for p in verbs
        if p.name != "__init__.py"
    }
    assert {m: names for m, names in offenders.items() if names} == {}


def test_the_core_does_no_io() -> None:
    found = {}
    for path in CORE:
        worldly = {n.split(".")[0] for n in imports_of(path) if n.split(".")[0] in WORLDLY}
        calls = {
            node.func.id
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in WORLDLY_CALLS
        }
        if worldly or calls:
            found[module_name(path)] = sorted(worldly | calls)
    assert found == {}


def test_importing_the_whole_core_loads_nothing_worldly() -> None:
    """Through everything it imports (yaml and packaging included): no subprocess, socket, thread
    or network code, and nothing of the layers above."""
    modules = [module_name(p) for p in CORE]
    code = (
        "import sys\n"
        f"for m in {modules!r}: __import__(m)\n"
        "bad = {'subprocess', 'socket', 'threading', 'http.client', 'urllib.request', 'concurrent.futures',\n"
        "       'click', 'fabric', 'paramiko', 'prometheus_client', 'vllm', 'torch'} & set(sys.modules)\n"
        "upper = ('launcher.node', 'launcher.operations', 'launcher.commands', 'launcher.cli',\n"
        "         'launcher.load', 'launcher.catalogs')\n"
        "bad |= {m for m in sys.modules if m.startswith(upper)}\n"
        "print(sorted(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def test_every_package_folder_is_a_package() -> None:
    """Folders without __init__.py would import here but be left out of a built wheel."""
    folders = {p.parent for p in ALL} - {PACKAGE}
    assert [str(f.relative_to(ROOT)) for f in sorted(folders) if not (f / "__init__.py").exists()] == []


def test_no_two_modules_share_a_name() -> None:
    """One name per thing: `probe_answer`, `probe_rows` and the probe itself, not three `probe.py`."""
    seen: dict[str, list[str]] = defaultdict(list)
    for path in ALL:
        if path.name != "__init__.py":
            seen[path.stem].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_only_the_command_line_imports_click() -> None:
    importing = [p for p in ALL if "click" in {n.split(".")[0] for n in imports_of(p)}]
    assert [module_name(p) for p in importing if not within(module_name(p), "launcher.cli")] == []
    assert importing  # the rule still sees click where it is imported


def test_only_node_ssh_imports_fabric_and_paramiko() -> None:
    offenders = [
        module_name(p)
        for p in ALL
        if {n.split(".")[0] for n in imports_of(p)} & {"fabric", "paramiko", "invoke"}
        and module_name(p) != "launcher.node.ssh"
    ]
    assert offenders == []


def test_no_type_checking_stand_in_outside_the_node_scripts() -> None:
    """`TYPE_CHECKING = False` saves a node's start the import of typing; the launcher loads typing
    anyway, so there it only hides names: `from typing import TYPE_CHECKING`."""
    offenders = [module_name(p) for p in OUTSIDE_THE_NODE_UNIT if "TYPE_CHECKING = False" in p.read_text()]
    assert offenders == []


def test_no_private_interpreter_module_is_imported() -> None:
    """`_sha2`, `_thread` and the like are CPython's own, and may change without notice."""
    offenders = {
        module_name(p): sorted(
            n for n in imports_of(p) if n.startswith("_") and n.split(".")[0] != "__future__"
        )
        for p in ALL
    }
    assert {m: names for m, names in offenders.items() if names} == {}


NODE_SCRIPTS = sorted(p for p in SCRIPTS.glob("*.py") if p.name != "__init__.py")
EXTRA = {"probe": {"vllm"}, "learn_catalog": {"vllm"}, "traits": {"vllm"}, "preflight": {"torch"}}
ENTRY = 'if __name__ == "__main__":'


def test_node_scripts_need_nothing_but_the_standard_library() -> None:
    offenders = {}
    for path in NODE_SCRIPTS:
        # Other modules of the unit travel with it.
        roots = {n.split(".")[0] for n in imports_of(path) if not within(n, "launcher.node.scripts")}
        extra = roots - set(sys.stdlib_module_names) - {"__future__"} - EXTRA.get(path.stem, set())
        if extra:
            offenders[path.stem] = sorted(extra)
    assert offenders == {}


def test_node_scripts_import_the_unit_relatively_and_nothing_else_of_the_launcher() -> None:
    """On a node the package is the unit's (`spark_node`), not `launcher.node.scripts`."""
    offenders = {}
    for path in NODE_SCRIPTS:
        found = [
            node.module or ""
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom)
            and not node.level
            and (node.module or "").startswith("launcher")
        ]
        found += [
            a.name
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Import)
            for a in node.names
            if a.name.startswith("launcher")
        ]
        if found:
            offenders[path.stem] = found
    assert offenders == {}


def _called_scripts() -> set[str]:
    """Every node script a Call of the core names (`script("NAME", ...)`, `Call(..., "NAME", ...)`)."""
    names = set()
    for path in CORE:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            args = {"script": node.args[:1], "Call": node.args[1:2]}.get(node.func.id, [])
            args += [k.value for k in node.keywords if k.arg == "script" and node.func.id == "Call"]
            names.update(a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return names


# Run by what the launcher writes rather than by a call it sends: an exported pod's init container.
RUN_ELSEWHERE = {"k8s_gate"}


def test_every_script_a_call_names_is_a_module_of_the_unit_with_an_entry() -> None:
    """And every module with an entry is called: a library has none."""
    entries = {p.stem for p in NODE_SCRIPTS if ENTRY in p.read_text()}
    called = _called_scripts() | RUN_ELSEWHERE
    assert {
        "rank_status",
        "install",
        "probe",
        "learn_catalog",
        "preflight",
    } <= called  # the finder finds them
    assert sorted(called ^ entries) == []


def _loaded_at_start(name: str) -> set[str]:
    """What script `name` has loaded once it is ready to run, run from the unit as a node runs it
    (python3 -S, the stub), its module imported but not run: the stub's imports and the script's
    top level, the standard library's own imports included. `if TYPE_CHECKING:` and imports in
    functions stay out."""
    from launcher.core.stubs import RUN_STUB
    from launcher.node.unit import unit_sha
    from tests.node_scripts import keep_unit

    with tempfile.TemporaryDirectory() as home:
        keep_unit(Path(home))
        stub = RUN_STUB.replace('run_name="__main__"', 'run_name="loaded"')
        program = stub + ";print(' '.join(sys.modules))"
        done = subprocess.run(
            ["python3", "-S", "-c", program, unit_sha(), name],
            capture_output=True,
            text=True,
            check=True,
            cwd=home,
            env={**os.environ, "HOME": home},
        )
    return set(done.stdout.split())


# What a node script's start must not load: each costs every call, on every node, a millisecond
# or two (typing 2 ms) for names that serve annotations only, or for one use on a rare path.
SLOW_AT_START = {"typing", "shutil", "tempfile", "csv", "base64", "platform"}
# These run under the node's vLLM install, which imports all of that anyway.
UNDER_VLLM = ("learn_catalog", "probe", "k8s_gate")


def test_a_node_script_loads_at_its_start_nothing_it_does_not_need_there() -> None:
    offenders = {}
    for path in NODE_SCRIPTS:
        if ENTRY in path.read_text() and path.stem not in UNDER_VLLM:
            slow = _loaded_at_start(path.stem) & SLOW_AT_START
            if slow:
                offenders[path.stem] = sorted(slow)
    assert offenders == {}


def test_the_status_poll_loads_only_what_it_needs() -> None:
    """`up` polls every second: running rank_status from the unit loads nothing of start, stop,
    the facts or the lock, only its own module and the library it uses."""
    from launcher.core.stubs import UNIT_PACKAGE

    ours = {m for m in _loaded_at_start("rank_status") if within(m, UNIT_PACKAGE)}
    assert ours == {UNIT_PACKAGE, f"{UNIT_PACKAGE}.common"}  # the script itself runs as __main__


def _module_graph() -> dict[str, set[str]]:
    """Each launcher module and the launcher modules it imports (typing-only imports included)."""
    modules = {module_name(p): p for p in ALL}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in launcher_imports(path):
            # `from a.b import c` names both a.b and a.b.c: keep what is a module
            target = imported
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in ("launcher",) or nxt.endswith("__init__"):
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_circle_not_even_for_types() -> None:
    """A type that must be imported back belongs lower down."""
    graph = _module_graph()
    # a package's __init__ is not an edge back to its own modules
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_planted_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


# The core's rooms, lowest first: a module imports only its own room and rooms below it.
CORE_ORDER = (
    ("stubs",),  # the text that runs first on a node: imports nothing
    ("spec",),
    ("vllm",),
    ("rules",),
    ("plan", "render", "remote", "rows", "fleet_plan", "endpoint_plan", "router"),
    ("sync",),
    ("answers",),
    ("checks", "init", "serving"),
    ("receipts",),  # a run's inputs as the checks gathered them; diff, lock file, release preview
    ("export",),  # the plan for other tools (Kubernetes), with the checks' planned values
    ("views", "reports", "redact", "terminal"),
)
SIDE_BY_SIDE = CORE_ORDER.index(("checks", "init", "serving"))  # rooms that never import each other


def _core_rank(module: str) -> tuple[int, str]:
    room = module.split(".")[2]
    for rank, rooms in enumerate(CORE_ORDER):
        if room in rooms:
            return rank, room
    raise AssertionError(f"{module} is in no room of CORE_ORDER: add it there")


def test_core_rooms_import_only_their_own_room_and_those_below() -> None:
    graph = _module_graph()
    offenders = {}
    for path in CORE:
        module = module_name(path)
        if module == "launcher.core":
            continue
        rank, room = _core_rank(module)
        wrong = []
        for target in graph[module]:
            if not target.startswith("launcher.core."):
                continue
            their_rank, their_room = _core_rank(target)
            if their_rank > rank or (their_rank == rank and their_room != room and rank == SIDE_BY_SIDE):
                wrong.append(target)
        if wrong:
            offenders[f"{module} (room {room})"] = sorted(wrong)
    assert offenders == {}
