"""Shared fixtures: spec builders for the fast tier, and the golden-file switch."""

from __future__ import annotations

import copy
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

from launcher.core.plan import Plan, build_plan
from launcher.core.spec.schema import build
from launcher.core.spec.sections import Spec
from launcher.core.vllm.models import kind_facts
from launcher.errors import Problem
from launcher.load import catalog_for
from launcher.node.cluster import Cluster
from tests import leftovers
from tests.fakes.local import LocalExecutor

ROOT = Path(__file__).resolve().parent.parent
# Test data holds sysfs-shaped trees whose links loop back (as /sys does): nothing to collect there.
collect_ignore = ["data"]

# No clock in the fast tier: Hypothesis's default deadline (200 ms an example) fails a test on
# a busy or slow machine, not because of what it tests. Speed is measured in bench/.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/* from the current output instead of comparing",
    )


@pytest.fixture(autouse=True, scope="session")
def ctrl_c_reaches_the_cli() -> None:
    """A session started in a shell's background inherits SIGINT ignored, and so would every
    CLI it starts and every `interrupt_main()` a test sends itself (Python drops it): a test's
    Ctrl-C would never arrive. Handled here, it is the default in what the tests start."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def operator_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The operator's cache (launcher.cache) for the whole session, and the CLIs it starts:
    never the user's own, whose learned catalogs and model files would change what plans."""
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("xdg-cache")
        patch.setenv("XDG_CACHE_HOME", str(path))
        yield path


@pytest.fixture(autouse=True, scope="session")
def session_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Receipts of runs started by module-scoped fixtures go to the session's state directory."""
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("state")
        patch.setenv("XDG_STATE_HOME", str(path))
        yield path


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Receipts of this test's runs go to its own state directory, never the developer's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


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
        "model": {"path": "/models/m"},
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


def spec_of(data: dict[str, Any]) -> Spec:
    """A Spec from plain data that must be valid."""
    problems: list[Problem] = []
    spec = build(Spec, data, (), problems)
    assert not problems, problems
    assert isinstance(spec, Spec)
    return spec


def plan_of(data: dict[str, Any], kind: str | None = "hybrid") -> Plan:
    """The plan of valid spec data, for a model of the given kind (None: the plan cannot tell)."""
    spec = spec_of(data)
    return build_plan(spec, kind_facts(kind, "test"), catalog_for(spec))


# Every local cluster made, as (name, run root): what each one leaves running fails its test.
LOCAL_CLUSTERS: list[tuple[str, Path]] = []


def local_cluster(data: dict[str, Any], home: Path, executor: LocalExecutor | None = None) -> Cluster:
    """A cluster whose nodes are all this machine (LocalExecutor, files under `home`).

    Its name is unique to this test process and this cluster: processes are ours by a marker
    naming the cluster, machine-wide, so two test runs (or two clusters) must not share one.
    Whatever it leaves running when its test (or module, for a module's cluster) ends is
    killed, and fails that test.
    """
    home.mkdir(exist_ok=True)
    # Its nodes' addresses are made up: its API is on this machine's loopback, where the fake listens.
    data = {"api": {"listen": "loopback"}, **data}
    spec = spec_of({**data, "name": f"{data['name']}-{os.getpid()}-{len(LOCAL_CLUSTERS)}"})
    plan = build_plan(spec, kind_facts("hybrid", "test"), catalog_for(spec))
    LOCAL_CLUSTERS.append((spec.name, home / ".spark-launch"))
    return Cluster(spec, plan, executor or LocalExecutor(home))


def running(cluster: Cluster) -> list[leftovers.Process]:
    """The live processes of a local cluster, seen from outside the launcher (marker, session, directory)."""
    root = dict(LOCAL_CLUSTERS)[cluster.spec.name]
    return leftovers.of(cluster.spec.name, root)


def fail_on_local_leftovers(since: int, what: str) -> None:
    """Kill what the local clusters made since index `since` left running; fail if there was any."""
    left = {name: leftovers.reap(name, root) for name, root in LOCAL_CLUSTERS[since:]}
    found = [f"{name}: {p}" for name, procs in left.items() for p in procs]
    if found:
        pytest.fail(f"{what} left processes running (killed now):\n  " + "\n  ".join(found), pytrace=False)


@pytest.fixture(autouse=True)
def no_local_leftovers() -> Iterator[None]:
    """Nothing a test's local cluster started outlives the test."""
    since = len(LOCAL_CLUSTERS)
    yield
    fail_on_local_leftovers(since, "this test's local cluster")


@pytest.fixture(autouse=True, scope="module")
def no_local_leftovers_in_the_module() -> Iterator[None]:
    """Nothing a module-scoped local cluster started outlives the module."""
    since = len(LOCAL_CLUSTERS)
    yield
    fail_on_local_leftovers(since, "this module's local cluster")


def fake_vllm_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor: LocalExecutor | None = None, **top: Any
) -> Cluster:
    """A two-node local cluster whose venv's `vllm` is the FAKE one (tests/fakes/vllm); `top`
    sets top-level keys of its spec (secrets=[...])."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "vllm").symlink_to(ROOT / "tests" / "fakes" / "vllm")
    py_spy = Path(sys.executable).parent / "py-spy"  # the real one, from the dev extras
    if py_spy.exists():
        (venv / "bin" / "py-spy").symlink_to(py_spy)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    data = {**base_spec("0.32.0", nodes=2), **top}
    data["vllm"]["venv"] = str(venv)
    data["serve"]["port"] = free_port()
    return local_cluster(data, tmp_path / "home", executor)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write(tmp_path: Path, data: dict[str, Any], name: str = "spec.yaml") -> Path:
    """Write spec data as YAML, keys in the order given."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
