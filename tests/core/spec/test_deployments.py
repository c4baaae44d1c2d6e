"""Several deployments in one spec: each planned as a one-model spec, located errors, ports and
memory weighed across deployments, the endpoint's routes. No node is reached here."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.memory_guard import gb10_facts
from launcher.core.checks import Report
from launcher.core.checks.memory_rows import budgets, shared_memory_row
from launcher.core.checks.router_rows import router_row
from launcher.core.endpoint_plan import ROUTER_VERSION
from launcher.errors import SparkLaunchError, SpecError
from launcher.load import plan_file, plan_fleet
from launcher.node.scripts.common import node_prefix, owner_of
from launcher.operations.gate import NodesDisagree, merge_reports
from tests.conftest import ROOT

MULTI = ROOT / "configs" / "multi-2x-spark.yaml"


@pytest.fixture(autouse=True)
def models_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan as from a machine without the models (the test bed's may be here)."""
    monkeypatch.setattr("launcher.load.local_model_files", lambda spec: None)


def multi() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(MULTI.read_text()))


def refused(tmp_path: Path, data: dict[str, Any]) -> list[str]:
    """Every problem of the spec, rendered `file:line: key: message`."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SpecError) as caught:
        plan_fleet(path)
    return [line for line in caught.value.render().splitlines() if not line.startswith("    hint")]


def line_of(tmp_path: Path, pattern: str) -> int:
    """The 1-based line of the written spec matching `pattern`."""
    lines = (tmp_path / "spec.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if re.search(pattern, line))


def test_each_deployment_is_planned_on_its_own_nodes() -> None:
    fleet = plan_fleet(MULTI)
    big, small = fleet.deployments
    assert (big.name, [n.name for n in big.plan.nodes]) == ("big", ["spark-1", "spark-2"])
    assert (small.name, [n.name for n in small.plan.nodes]) == ("small", ["spark-2"])
    assert big.plan.master_port == 29501 and small.plan.master_port is None
    assert small.plan.nodes[0].argv[:3] == ("/opt/vllm/bin/vllm", "serve", "/models/Qwen3-4B-Instruct-2507")
    assert not [a for a in small.plan.nodes[0].argv if a.startswith(("--node-rank", "--nnodes", "--master"))]
    assert big.spec.name == "spark-lab/big" and big.plan.cluster == "spark-lab/big"


def test_a_one_model_spec_is_one_deployment_named_after_the_cluster() -> None:
    fleet = plan_fleet(ROOT / "configs" / "demo.yaml")
    assert not fleet.multi and [d.name for d in fleet.deployments] == ["demo"]
    assert fleet.deployments[0].spec == plan_file(ROOT / "configs" / "demo.yaml")[0]


def test_the_endpoint_routes_each_served_name_to_its_deployments_head() -> None:
    endpoint = plan_fleet(MULTI).endpoint
    assert endpoint is not None and endpoint.url == "http://10.0.0.1:9000/v1"
    config = json.loads(endpoint.config)
    routes = {m["model_name"]: m["litellm_params"]["api_base"] for m in config["model_list"]}
    # big's API is on spark-1's loopback, beside the endpoint; small's on spark-2's address
    assert routes == {"qwen3-next": "http://127.0.0.1:8000/v1", "qwen3-4b": "http://10.0.0.2:8001/v1"}
    assert endpoint.argv[-4:] == ("--host", "10.0.0.1", "--port", "9000")
    assert "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY" not in endpoint.env


def test_the_endpoints_client_key_is_its_own_secret_and_the_deployments_key_is_what_it_sends_them() -> None:
    endpoint = plan_fleet(MULTI).endpoint
    assert endpoint is not None and endpoint.key == "SPARK_ENDPOINT_KEY"
    assert endpoint.secrets == ("VLLM_API_KEY", "SPARK_ENDPOINT_KEY") and endpoint.warnings == ()
    config = json.loads(endpoint.config)
    assert config["general_settings"]["master_key"] == "os.environ/SPARK_ENDPOINT_KEY"
    assert all(m["litellm_params"]["api_key"] == "os.environ/VLLM_API_KEY" for m in config["model_list"])
    assert "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY" not in endpoint.env


def test_the_router_pin_is_what_the_venv_script_installs() -> None:
    lock = (ROOT / "launcher" / "catalogs" / "router-requirements.txt").read_text()
    assert re.search(rf"^litellm=={re.escape(ROUTER_VERSION)} \\$", lock, re.MULTILINE)


def test_a_deployment_on_an_unknown_node_is_located(tmp_path: Path) -> None:
    data = multi()
    data["deployments"][1]["nodes"] = ["spark-3"]
    problems = refused(tmp_path, data)
    line = line_of(tmp_path, r"- spark-3")
    assert problems == [
        f"{tmp_path}/spec.yaml:{line}: deployments[1].nodes[0]: 'spark-3' is not one of the nodes"
    ]


def test_two_deployments_with_one_served_name_are_refused(tmp_path: Path) -> None:
    data = multi()
    data["deployments"][1]["model"]["served_name"] = "qwen3-next"
    problems = refused(tmp_path, data)
    assert sum("'qwen3-next' is served by more than one deployment" in p for p in problems) == 2
    assert any(
        p.startswith(f"{tmp_path}/spec.yaml:") and "deployments[1].model.served_name" in p for p in problems
    )


def test_parallel_sizes_that_do_not_fit_a_deployments_nodes_are_located_in_it(tmp_path: Path) -> None:
    data = multi()
    data["deployments"][1]["serve"]["tensor_parallel_size"] = 2
    problems = refused(tmp_path, data)
    wanted = (
        "deployments[1].serve.tensor_parallel_size: tensor x pipeline x data parallel = 2, but the 1 node"
    )
    found = [p for p in problems if wanted in p]
    assert found, problems
    lines = (tmp_path / "spec.yaml").read_text().splitlines()
    number = int(found[0].split(":")[1])
    assert lines[number - 1].strip() == "tensor_parallel_size: 2" and number > line_of(
        tmp_path, r"name: small"
    )


def test_a_top_level_model_cannot_go_with_deployments(tmp_path: Path) -> None:
    data = multi()
    data["model"] = {"path": "/models/x"}
    assert any("model: a top-level model cannot go with deployments:" in p for p in refused(tmp_path, data))


def test_a_one_node_deployment_takes_no_master_port(tmp_path: Path) -> None:
    data = multi()
    data["deployments"][1]["serve"]["master_port"] = 29502
    problems = refused(tmp_path, data)
    assert any(
        "deployments[1].serve.master_port: a one-node deployment has no rendezvous" in p for p in problems
    )


def test_the_same_api_port_on_another_node_does_not_clash(tmp_path: Path) -> None:
    data = multi()
    data["deployments"][1]["serve"]["port"] = 8000  # on spark-2, where big's rank 1 binds no API port
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    assert [d.plan.api_port for d in plan_fleet(path).deployments] == [8000, 8000]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"serve.port": 8000}, "port 8000 on spark-1 is also deployment big's API port"),
        ({"serve.port": 29501}, "port 29501 on spark-1 is also deployment big's master port"),
        ({"serve.port": None}, "port 8000 (the default) on spark-1 is also deployment big's API port"),
        ({"endpoint": 8001}, "endpoint.port: port 8001 on spark-1 is also deployment small's API port"),
    ],
)
def test_clashing_ports_on_one_node_are_refused(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    data = multi()
    data["deployments"][1]["nodes"] = ["spark-1"]  # small beside big's rank 0
    for key, value in change.items():
        if key == "endpoint":
            data["endpoint"]["port"] = value
        elif value is None:
            data["deployments"][1]["serve"].pop("port")
        else:
            data["deployments"][1]["serve"]["port"] = value
    problems = refused(tmp_path, data)
    assert any(message in p for p in problems), problems


def test_an_unknown_deployment_is_named_with_the_known_ones() -> None:
    with pytest.raises(SparkLaunchError) as caught:
        plan_fleet(MULTI).select("medium")
    assert (
        caught.value.message == "no deployment named 'medium' in spark-lab"
        and caught.value.hint == "deployments: big, small"
    )


def small_facts(total_util: float) -> dict[str, Any]:
    """A GB10 whose page cache was just dropped, and a small dense model's facts on it."""
    facts = gb10_facts("/models/Qwen3-Next-80B-A3B-Instruct", dropped=True)
    facts["memory"]["model_config"] = {
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "torch_dtype": "bfloat16",
    }
    facts["model"] = {"weight_bytes": 8 * 10**9}
    return facts


def weighed(small_utilization: float) -> dict[str, Any]:
    """Each deployment's budgets on GB10 nodes, small's gpu_memory_utilization as given."""
    data = multi()
    data["deployments"][1]["serve"]["gpu_memory_utilization"] = small_utilization
    fleet = plan_fleet(_written(data))
    big, small = fleet.deployments
    big_facts = {n.name: gb10_facts(big.spec.model.path, dropped=True) for n in big.spec.nodes}
    small_node = {"spark-2": small_facts(small_utilization)}
    return {
        "big": budgets(big.spec, big.plan, big_facts),
        "small": budgets(small.spec, small.plan, small_node),
    }


def _written(data: dict[str, Any]) -> Path:
    path = Path(__file__).parent / ".tmp-multi.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(autouse=True)
def no_leftover() -> Any:
    yield
    (Path(__file__).parent / ".tmp-multi.yaml").unlink(missing_ok=True)


def test_deployments_that_fit_a_shared_node_together_pass() -> None:
    row = shared_memory_row(weighed(0.25))
    assert row is not None and row.ok and list(row.values) == ["spark-2"]
    assert row.values["spark-2"] == "big 73.0 + small 30.4 = 103.4 of 109.1 usable"


def test_deployments_over_a_shared_node_together_are_refused_with_the_numbers() -> None:
    found = weighed(0.5)
    row = shared_memory_row(found)
    assert row is not None and row.failed
    assert row.values["spark-2"] == "big 73.0 + small 60.8 = 133.9 of 109.1 usable"
    assert row.hint is not None and row.hint.startswith(
        "spark-2: the deployments on it claim 133.9 GiB together"
    )
    assert "big claims 73.0 GiB (gpu_memory_utilization 0.6 x 121.7 GiB)" in row.hint
    # Alone, each fits: only the sum is over.
    assert all(b.claim <= b.usable for per_node in found.values() for b in per_node.values())
    merged = merge_reports({n: Report(tuple(b), (), memory=b) for n, b in found.items()})
    refusal = NodesDisagree(merged)
    assert refusal.message == "the plan does not fit the nodes' memory: nothing was started"


def test_each_deployments_processes_have_their_own_marker_prefix() -> None:
    big = "/root/.spark-launch/lab/big/node2"
    other = "/root/.spark-launch/other/big/node2"
    assert node_prefix(big) == "lab/big/node2/" and node_prefix(other) == "other/big/node2/"
    assert node_prefix("/root/.spark-launch/demo/node1") == "demo/node1/"  # one deployment: as before
    assert owner_of(big) == "lab/big" and owner_of("/root/.spark-launch/lab/endpoint/node1") == "lab/endpoint"


def test_the_router_row_names_the_pin_and_where_to_build_it(tmp_path: Path) -> None:
    data = multi()
    data["endpoint"]["venv"] = "/opt/spark-launch-router"  # built by hand: held to the pin
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    endpoint = plan_fleet(path).endpoint
    assert endpoint is not None
    assert router_row(endpoint, ROUTER_VERSION).ok
    missing = router_row(endpoint, None)
    assert missing.failed and missing.values == {"spark-1": "no litellm in /opt/spark-launch-router"}
    assert missing.hint is not None and "leave endpoint.venv out and `up` installs it" in missing.hint
    assert router_row(endpoint, "1.107.0").failed
    ours = plan_fleet(MULTI).endpoint  # no endpoint.venv: the launcher's own, which `up` installs
    assert ours is not None
    later = router_row(ours, None)
    assert later.ok and "not installed yet in ~/.spark-launch/router/litellm-" in later.values["spark-1"]
