"""The endpoint's router where the launcher keeps it: its venv under the head user's home, keyed
by the lock's hash; the calls that install it there from the lock that ships with the launcher;
the routes of what runs only."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from launcher.catalogs import router_key, router_lock, router_script
from launcher.core.endpoint_plan import ROUTER_VERSION, EndpointPlan
from launcher.core.router import install_calls, managed, on_node, routed, version_call
from launcher.load import plan_fleet
from tests.conftest import ROOT

MULTI = ROOT / "configs" / "multi-2x-spark.yaml"


def endpoint_of(path: Path) -> EndpointPlan:
    endpoint = plan_fleet(path).endpoint
    assert endpoint is not None
    return endpoint


def test_without_endpoint_venv_the_router_runs_from_the_launchers_own_venv_keyed_by_the_lock() -> None:
    plan = endpoint_of(MULTI)
    key = hashlib.sha256((ROOT / "launcher/catalogs/router-requirements.txt").read_bytes()).hexdigest()[:12]
    assert router_key() == key
    assert plan.argv[0] == f"~/.spark-launch/router/litellm-{ROUTER_VERSION}-{key}/bin/litellm"
    assert managed(plan)


def test_an_endpoint_venv_in_the_spec_is_the_operators(tmp_path: Path) -> None:
    data = yaml.safe_load(MULTI.read_text())
    data["endpoint"]["venv"] = "/opt/router"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    plan = endpoint_of(path)
    assert plan.argv[0] == "/opt/router/bin/litellm" and not managed(plan)


def test_the_install_sends_the_shipped_lock_and_runs_the_shipped_script_on_it() -> None:
    plan = endpoint_of(MULTI)
    write, build = install_calls(plan, router_lock(), router_script())
    venv = f"~/.spark-launch/router/litellm-{ROUTER_VERSION}-{router_key()}"
    assert (
        write.command
        == f'mkdir -p "$HOME"/.spark-launch/router && cat > {on_node(venv + ".requirements.txt")}'
    )
    assert write.data == router_lock() and "--hash=sha256:" in router_lock()
    assert build.command == (
        f"bash -s -- --venv {on_node(venv)} --requirements {on_node(venv + '.requirements.txt')}"
    )
    assert build.data == router_script() and "--require-hashes" in router_script()
    assert on_node(venv).startswith('"$HOME"/')  # the node's shell finds the home, the rest quoted
    assert version_call(plan).command.startswith(f"{on_node(venv + '/bin/python')} -c ")


def test_the_routes_are_those_of_the_deployments_that_run() -> None:
    plan = endpoint_of(MULTI)
    assert routed(plan, ["big", "small"]) == plan  # every one runs: the same plan (no restart)
    small = routed(plan, ["small"])
    assert [r.deployment for r in small.routes] == ["small"] and small.digest != plan.digest
    models = [m["model_name"] for m in json.loads(small.config)["model_list"]]
    assert models == [r.model for r in small.routes]
    assert small.argv == plan.argv and small.env == plan.env
