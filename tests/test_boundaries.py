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
import subprocess
import sys
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


def test_node_scripts_need_nothing_but_the_standard_library() -> None:
    offenders = {}
    for path in NODE_SCRIPTS:
        # Other node scripts (libraries, or a script it borrows from) travel with it.
        roots = {n.split(".")[0] for n in imports_of(path) if not n.startswith("launcher.node.scripts.")}
        extra = roots - set(sys.stdlib_module_names) - {"__future__"} - EXTRA.get(path.stem, set())
        if extra:
            offenders[path.stem] = sorted(extra)
    assert offenders == {}


def test_every_node_script_is_a_script_or_a_library() -> None:
    from launcher.node.scripts import LIBRARIES, LOADER, NAMES

    assert {p.stem for p in NODE_SCRIPTS} == set(NAMES) | set(LIBRARIES) | {LOADER}


def _sent_alone() -> list[str]:
    from launcher.node.scripts import LIBRARIES

    return [p.stem for p in NODE_SCRIPTS if p.stem not in (*LIBRARIES, "probe", "loader")]


def test_each_node_script_is_sent_whole_and_compiles_alone() -> None:
    from launcher.node.scripts import bundle

    reaching_back = []
    for name in _sent_alone():
        source = bundle(name)
        compile(source, f"<{name} as sent>", "exec")
        if "launcher" in {n.split(".")[0] for n in _imports_in(source)}:
            reaching_back.append(name)
    assert reaching_back == []


# What a node script's start must not load: each costs every call, on every node, a millisecond
# or two (typing 2 ms) for names that serve annotations only, or for one use on a rare path.
SLOW_AT_START = {"typing", "shutil", "tempfile", "csv", "base64", "platform"}
# These run under the node's vLLM install, which imports all of that anyway.
UNDER_VLLM = ("learn_catalog", "k8s_gate")


def test_a_node_script_loads_at_its_start_nothing_it_does_not_need_there() -> None:
    from launcher.node.scripts import bundle

    offenders = {}
    for name in (n for n in _sent_alone() if n not in UNDER_VLLM):
        # The bundle's top-level imports, run as a node runs them (python3 -S): what they load, the
        # standard library's own imports included. `if TYPE_CHECKING:` and imports in functions stay out.
        top = [n for n in ast.parse(bundle(name)).body if isinstance(n, (ast.Import, ast.ImportFrom))]
        program = ast.unparse(ast.Module(top, [])) + "\nimport sys\nprint(' '.join(sys.modules))"
        loaded = subprocess.run(["python3", "-S", "-c", program], capture_output=True, text=True, check=True)
        slow = set(loaded.stdout.split()) & SLOW_AT_START
        if slow:
            offenders[name] = sorted(slow)
    assert offenders == {}


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

    poll = bundle("rank_status")
    assert [
        f for f in ("def start(", "def stop(", "def facts(", "def listen(", "def lock(") if f in poll
    ] == []


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
