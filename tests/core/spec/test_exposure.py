"""What listens where, said out loud: vLLM's --host (api.listen), the endpoint's own client key,
and the warnings `validate`, `plan` and `up` give for what is open. No node is reached here."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.core.fleet_plan import Fleet
from launcher.errors import SpecError
from launcher.load import plan_fleet
from tests.conftest import ROOT
from tests.invoke import invoke

MULTI = ROOT / "configs" / "multi-2x-spark.yaml"
QWEN = ROOT / "configs" / "qwen3-next-2x-spark.yaml"
WEAK = "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY"


@pytest.fixture(autouse=True)
def models_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan as from a machine without the models (the test bed's may be here)."""
    monkeypatch.setattr("launcher.load.local_model_files", lambda spec: None)


def load(path: Path) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(path.read_text()))


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def fleet(tmp_path: Path, data: dict[str, Any]) -> Fleet:
    return plan_fleet(write(tmp_path, data))


def problems(tmp_path: Path, data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        fleet(tmp_path, data)
    return [(p.dotted, p.message) for p in caught.value.problems]


def host(f: Fleet, deployment: int = 0) -> str:
    plan = f.deployments[deployment].plan
    (word,) = [w for w in plan.nodes[0].argv if w.startswith("--host=")]
    return word.removeprefix("--host=")


# -- vLLM's --host ----------------------------------------------------------------------------------
def test_every_plan_renders_host_and_never_every_interface_unasked() -> None:
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        for d in plan_fleet(path).deployments:
            words = [w for w in d.plan.nodes[0].argv if w.startswith("--host=")]
            assert len(words) == 1 and words[0] != "--host=0.0.0.0", (path.name, words)
            assert all(words[0] in n.argv for n in d.plan.nodes)  # the same on every node


def test_behind_an_endpoint_on_the_same_node_the_api_is_on_loopback(tmp_path: Path) -> None:
    f = plan_fleet(MULTI)
    assert host(f, 0) == "127.0.0.1"  # big: rank 0 on spark-1, where the endpoint runs
    assert host(f, 1) == "10.0.0.2"  # small: on spark-2, reached by the endpoint over the fabric
    big, small = (d.plan for d in f.deployments)
    assert big.warnings == () and small.warnings == ()
    (note,) = [n for n in small.notes if "listens on" in n]
    assert note.startswith("the API listens on 10.0.0.2:8001 so that the endpoint on spark-1 reaches it")
    assert "firewall port 8001 of spark-2 to spark-1" in note
    row = next(d for d in big.derived if d.setting == "host")
    assert (row.value, row.flag, row.source) == ("127.0.0.1", "--host=127.0.0.1", "launcher")


def test_without_an_endpoint_the_api_is_on_the_heads_address_and_a_warning_says_what_is_open() -> None:
    f = plan_fleet(QWEN)
    assert host(f) == "10.0.0.1"
    (warning,) = f.warnings()
    assert warning.startswith("the API listens on 10.0.0.1:8000 with no endpoint in front; ")
    assert "VLLM_API_KEY guards /v1 only (/invocations, /tokenize" in warning and "/pause" in warning


def test_without_a_key_the_warning_says_the_api_takes_any_request(tmp_path: Path) -> None:
    data = load(QWEN)
    data["secrets"] = ["HF_TOKEN"]
    (warning,) = fleet(tmp_path, data).warnings()
    assert "without VLLM_API_KEY it takes any request" in warning


@pytest.mark.parametrize(
    ("listen", "expected", "warned"),
    [
        ("loopback", "127.0.0.1", False),
        ("fabric", "10.0.0.1", True),
        ("all", "0.0.0.0", True),
        ("192.168.1.11", "192.168.1.11", True),
    ],
)
def test_api_listen_says_where(tmp_path: Path, listen: str, expected: str, warned: bool) -> None:
    data = load(QWEN)
    data["api"] = {"listen": listen}
    f = fleet(tmp_path, data)
    assert host(f) == expected and bool(f.warnings()) == warned
    row = next(d for d in f.deployments[0].plan.derived if d.setting == "host")
    assert row.source == "spec"
    if listen == "all":
        assert f.warnings()[0].startswith("the API listens on every interface of spark-1 (port 8000)")


@pytest.mark.parametrize(
    ("listen", "says"),
    [
        ("0.0.0.0", "'0.0.0.0' is every interface"),
        ("127.0.0.1", "'127.0.0.1' is the loopback address"),
        ("spark-1.lan", "'spark-1.lan' is neither loopback, fabric, all nor an IP address"),
        ("10.0.0.2", "10.0.0.2 is one node's address, but the API listens on spark-1"),
    ],
)
def test_a_listen_that_cannot_be_meant_is_refused(tmp_path: Path, listen: str, says: str) -> None:
    data = load(QWEN)
    data["api"] = {"listen": listen}
    found = problems(tmp_path, data)
    assert [p for p in found if p[0] == "api.listen" and says in p[1]], found


def test_loopback_is_refused_where_the_endpoint_could_not_reach_a_deployment(tmp_path: Path) -> None:
    data = load(MULTI)
    data["api"] = {"listen": "loopback"}
    found = problems(tmp_path, data)
    assert ("api.listen", "the endpoint on spark-1 could not reach a deployment whose API listens on "
            "spark-2's loopback") in found  # fmt: skip
    assert [p[0] for p in found].count("api.listen") == 1, found  # said once, not again by a rule


def test_serve_host_is_refused_for_api_listen(tmp_path: Path) -> None:
    data = load(QWEN)
    data["serve"]["host"] = "0.0.0.0"
    assert ("serve.host", "comes from api.listen") in problems(tmp_path, data)


def test_the_launcher_reaches_the_api_where_it_listens(tmp_path: Path) -> None:
    data = load(QWEN)
    for listen, seen in (("loopback", "127.0.0.1"), ("fabric", "10.0.0.1"), ("all", "127.0.0.1")):
        data["api"] = {"listen": listen}
        assert fleet(tmp_path, data).deployments[0].plan.api_host == seen


# -- the endpoint's own key -----------------------------------------------------------------------
def test_an_endpoint_without_its_own_key_is_refused_and_says_how(tmp_path: Path) -> None:
    data = load(MULTI)
    del data["endpoint"]["key"]
    with pytest.raises(SpecError) as caught:
        fleet(tmp_path, data)
    (problem,) = caught.value.problems
    assert problem.dotted == "endpoint.key" and problem.message.startswith("is required")
    assert "endpoint.auth: none" in (problem.hint or "")


@pytest.mark.parametrize(
    ("endpoint", "secrets", "says"),
    [
        ({"key": "VLLM_API_KEY"}, ["VLLM_API_KEY"], "VLLM_API_KEY is the deployments' own key"),
        ({"key": "ROUTER_KEY"}, ["VLLM_API_KEY"], "ROUTER_KEY is not under secrets:"),
        ({"key": "ROUTER_KEY", "auth": "none"}, ["ROUTER_KEY"], "is given, but endpoint.auth is none"),
    ],
)
def test_an_endpoint_key_that_cannot_work_is_refused(
    tmp_path: Path, endpoint: dict[str, str], secrets: list[str], says: str
) -> None:
    data = load(MULTI)
    data["endpoint"] = {"port": 9000, "venv": "/opt/router", **endpoint}
    data["secrets"] = secrets
    assert [m for p, m in problems(tmp_path, data) if p == "endpoint.key" and says in m]


def test_auth_none_is_the_only_way_to_an_open_endpoint_and_it_is_warned(tmp_path: Path) -> None:
    data = load(MULTI)
    data["endpoint"] = {"port": 9000, "venv": "/opt/router", "auth": "none"}
    f = fleet(tmp_path, data)
    assert f.endpoint is not None and f.endpoint.env[WEAK] == "true" and f.endpoint.key is None
    assert json.loads(f.endpoint.config)["general_settings"] == {}
    (warning,) = f.warnings()
    assert warning.startswith("the endpoint on 10.0.0.1:9000 takes every request without a key")


def test_validate_and_plan_say_the_warnings(tmp_path: Path) -> None:
    data = load(MULTI)
    data["endpoint"] = {"port": 9000, "venv": "/opt/router", "auth": "none"}
    path = write(tmp_path, data)
    done = invoke(["validate", str(path)])
    assert done.exit_code == 0, done.output
    assert f"{path}: warning: the endpoint on 10.0.0.1:9000 takes every request without a key" in done.output
    said = json.loads(invoke(["validate", str(path), "--json"]).output)
    assert said["ok"] and said["warnings"][0].startswith("the endpoint on 10.0.0.1:9000")
    text = invoke(["plan", str(path)]).output
    assert "NO client key (endpoint.auth: none)" in text and "! the endpoint on 10.0.0.1:9000" in text
    single = invoke(["plan", str(QWEN), "--json"]).output
    assert json.loads(single)["deployments"][0]["warnings"][0].startswith("the API listens on 10.0.0.1:8000")
