"""The layers, checked: each package imports only what its layer may, and the core does no I/O.

    records, digest  <-  errors  <-  core  <-  node  <-  commands  <-  cli
                                       ^-- load, catalogs (the planning path's file reads)

The core turns values into values (no environment, files, printing, clock, subprocess,
sockets), the node side never reaches up into the commands, only the cli imports click, and
only node/ssh.py imports fabric/paramiko.
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
def test_the_core_imports_only_itself_and_the_bottom_layers(path: Path) -> None:
    allowed_here = ("launcher.core", "launcher.errors", "launcher.records", "launcher.digest")
    outside = {n for n in launcher_imports(path) if not allowed(n, *allowed_here)}
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


def test_records_digest_and_errors_are_the_bottom_layers() -> None:
    assert launcher_imports(PACKAGE / "records.py") == set()
    assert launcher_imports(PACKAGE / "digest.py") == set()
    assert launcher_imports(PACKAGE / "errors.py") <= {"launcher.records", "launcher.records.record"}


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


def test_only_the_cli_imports_click() -> None:
    importing = [p for p in ALL if "click" in {n.split(".")[0] for n in imports_of(p)}]
    assert [module_name(p) for p in importing if not in_package(p, "launcher.cli")] == []
    assert importing  # the rule still sees click where it is imported


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_ssh_only_in_node_ssh(path: Path) -> None:
    roots = {n.split(".")[0] for n in imports_of(path)}
    if module_name(path) != "launcher.node.ssh":
        assert not roots & {"fabric", "paramiko", "invoke"}


NODE_SCRIPTS = sorted(p for p in SCRIPTS.glob("*.py") if p.name != "__init__.py")


def _libraries() -> tuple[str, ...]:
    from launcher.node.scripts import LIBRARIES

    return LIBRARIES


@pytest.mark.parametrize("path", NODE_SCRIPTS, ids=[p.stem for p in NODE_SCRIPTS])
def test_node_scripts_need_nothing_but_the_standard_library(path: Path) -> None:
    extra = {"probe": {"vllm"}, "catalog": {"vllm"}, "traits": {"vllm"}, "preflight": {"torch"}}.get(
        path.stem, set()
    )
    # Other node scripts (libraries, or a script it borrows from) are inlined by bundle().
    roots = {n.split(".")[0] for n in imports_of(path) if not n.startswith("launcher.node.scripts.")}
    assert roots <= set(sys.stdlib_module_names) | {"__future__"} | extra


def test_every_node_script_is_a_script_or_a_library() -> None:
    from launcher.node.scripts import LIBRARIES, LOADER, NAMES

    assert {p.stem for p in NODE_SCRIPTS} == set(NAMES) | set(LIBRARIES) | {LOADER}


SENT_ALONE = [p.stem for p in NODE_SCRIPTS if p.stem not in (*_libraries(), "probe", "loader")]


@pytest.mark.parametrize("name", SENT_ALONE)
def test_each_node_script_is_sent_whole_and_compiles_alone(name: str) -> None:
    from launcher.node.scripts import bundle

    source = bundle(name)
    compile(source, f"<{name} as sent>", "exec")
    assert "launcher" not in {n.split(".")[0] for n in _imports_in(source)}


# What a node script's start must not load: each costs every call, on every node, a millisecond
# or two (typing 2 ms) for names that serve annotations only, or for one use on a rare path.
SLOW_AT_START = {"typing", "shutil", "tempfile", "csv", "base64", "platform"}
# These run under the node's vLLM install, which imports all of that anyway.
UNDER_VLLM = ("catalog",)


@pytest.mark.parametrize("name", [n for n in SENT_ALONE if n not in UNDER_VLLM])
def test_a_node_script_loads_at_its_start_nothing_it_does_not_need_there(name: str) -> None:
    from launcher.node.scripts import bundle

    # The bundle's top-level imports, run as a node runs them (python3 -S): what they load, the
    # standard library's own imports included. `if TYPE_CHECKING:` and imports in functions stay out.
    top = [n for n in ast.parse(bundle(name)).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    program = ast.unparse(ast.Module(top, [])) + "\nimport sys\nprint(' '.join(sys.modules))"
    loaded = subprocess.run(["python3", "-S", "-c", program], capture_output=True, text=True, check=True)
    assert not set(loaded.stdout.split()) & SLOW_AT_START


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
    ("plan", "render", "remote", "rows", "fleet", "endpoint"),
    ("sync",),
    ("answers",),
    ("checks", "init", "serving"),
    ("receipts",),  # a run's inputs as the checks gathered them; diff, lock file, release preview
    ("views", "reports", "redact", "terminal"),
)
SIDE_BY_SIDE = CORE_ORDER.index(("checks", "init", "serving"))  # rooms that never import each other


def _core_rank(module: str) -> tuple[int, str]:
    room = module.split(".")[2]
    for rank, rooms in enumerate(CORE_ORDER):
        if room in rooms:
            return rank, room
    raise AssertionError(f"{module} is in no room of CORE_ORDER: add it there")


CORE_MODULES = [p for p in CORE if module_name(p) != "launcher.core"]


@pytest.mark.parametrize("path", CORE_MODULES, ids=ids(CORE_MODULES))
def test_core_rooms_import_only_their_own_room_and_those_below(path: Path) -> None:
    rank, room = _core_rank(module_name(path))
    graph = _module_graph()
    wrong = []
    for target in graph[module_name(path)]:
        if not target.startswith("launcher.core."):
            continue
        their_rank, their_room = _core_rank(target)
        if their_rank > rank or (their_rank == rank and their_room != room and rank == SIDE_BY_SIDE):
            wrong.append(target)
    assert not wrong, f"{module_name(path)} (room {room}) imports from above or beside it: {sorted(wrong)}"


# A verb's module is what one command does; what several share lives in a module of its own.
VERBS = {
    f"launcher.commands.{v}"
    for v in (
        "check",
        "up",
        "down",
        "status",
        "logs",
        "verify",
        "init",
        "facts",
        "diagnose",
        "supervise",
        "systemd",
        "sync.models",
        "sync.images",
        "runs",
        "diff",
        "lockfile",
    )
}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_verb_borrows_nothing_from_another_but_its_public_entry(verb: str) -> None:
    """`up` may run `check` (its `__all__`), never reach into its helpers."""
    path = ROOT / (verb.replace(".", "/") + ".py")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in VERBS - {verb}:
            other = ROOT / (node.module.replace(".", "/") + ".py")
            public = _public_names(other)
            borrowed = {a.name for a in node.names} - public
            assert not borrowed, (
                f"{verb} borrows {sorted(borrowed)} from {node.module} (its __all__: {public})"
            )


def _public_names(path: Path) -> set[str]:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{path.relative_to(ROOT)} is imported by another verb but declares no __all__")
