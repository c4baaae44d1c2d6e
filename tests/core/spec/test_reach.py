"""Any spec reaches a running cluster: `status` and `down` need only the cluster's name, its nodes
and SSH; a spec that no longer plans works from what the nodes' state says runs (fast tier:
the real node agent on this machine, the FAKE vLLM; tests/e2e/test_operator_machine.py does it
on the test bed with the real one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from launcher.core.serving.state import api_endpoint
from launcher.core.spec.reach import Reach, reach_of
from launcher.node.cluster import Cluster, Reached
from launcher.node.executor import NodeError
from launcher.node.ssh import SshExecutor
from launcher.operations.reporter import Silent
from launcher.operations.running.cluster_status import status
from launcher.operations.running.starting import UpOptions, up
from launcher.operations.running.stopping import down
from tests.conftest import base_spec, edit, fake_vllm_cluster


@pytest.mark.parametrize(
    "changes",
    [
        {"vllm.version": "0.99.1"},  # a release without rules or catalog here
        {"vllm.version": "latest"},
        {"serve.tensor_paralel_size": 2},  # a typo
        {"vllm": "0.33.0"},  # a whole section broken
        {"model": None, "serve": None, "vllm.runtime": "podman"},
    ],
)
def test_the_reach_of_a_spec_that_does_not_plan_is_its_name_and_nodes(changes: dict[str, object]) -> None:
    reach, problems = reach_of(edit(base_spec(), **changes))
    assert problems == [] and reach is not None
    assert (reach.name, [n.name for n in reach.nodes], [n.ssh for n in reach.nodes]) == (
        "t",
        ["n1", "n2"],
        ["n1", "n2"],
    )


def test_the_reach_keeps_what_stopping_needs_when_it_is_readable() -> None:
    data = edit(base_spec(), **{"vllm.runtime": "docker", "secrets": ["VLLM_API_KEY"], "vllm.version": "x y"})
    reach, _ = reach_of(data)
    assert reach is not None and reach.runtime == "docker" and reach.secrets == ("VLLM_API_KEY",)
    assert reach_of(edit(base_spec(), **{"vllm.runtime": "podman"}))[0].runtime is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"nodes": []}, "nodes"),
        ({"nodes.1.ssh": "-oProxyCommand=x"}, "nodes[1].ssh"),
        ({"name": "Bad Name"}, "name"),
        ({"name": None}, "name"),
        ({"nodes.1.name": "n1"}, "nodes[0].name"),
    ],
)
def test_a_spec_whose_name_or_nodes_are_broken_reaches_nothing(
    changes: dict[str, object], where: str
) -> None:
    reach, problems = reach_of(edit(base_spec(), **changes))
    assert reach is None and where in {p.dotted for p in problems}


@pytest.mark.parametrize(
    ("argv", "endpoint"),
    [
        (["vllm", "serve", "/m", "--port=8001", "--node-rank=0"], ("127.0.0.1", 8001)),
        (["vllm", "serve", "/m", "--host", "10.0.0.1", "--port", "9000"], ("10.0.0.1", 9000)),
        (["vllm", "serve", "/m", "--host=0.0.0.0"], ("127.0.0.1", 8000)),
        ([], None),
    ],
)
def test_the_heads_api_is_where_its_running_command_says(
    argv: list[str], endpoint: tuple[str, int] | None
) -> None:
    assert api_endpoint(argv) == endpoint


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return fake_vllm_cluster(tmp_path, monkeypatch)


def test_status_and_down_work_from_the_nodes_state_alone(cluster: Cluster) -> None:
    up(cluster, {}, UpOptions(timeout=60, check=False, grace=2), Silent())
    unplanned = Reached(Reach.of(cluster.spec), cluster.executor)  # no plan, no endpoint
    try:
        st = status(unplanned, deadline=10)
        assert st.state == "running" and st.plan_digest is None and st.health == 200
        assert st.serving is not None and st.serving.state == "serving"
        assert unplanned.endpoint == ("127.0.0.1", cluster.plan.api_port)
        assert [st.matches(n) for n in st.nodes] == [None, None]
    finally:
        stopped = down(unplanned, 2, Silent())
    assert stopped.clean and all(r.found >= 1 for r in stopped.per_node.values())
    assert status(cluster).state == "stopped"
    assert status(Reached(Reach.of(cluster.spec), cluster.executor)).health is None  # nothing to ask


def test_diagnose_bundles_the_specs_problems_instead_of_the_plan_from_the_nodes_state(
    cluster: Cluster, tmp_path: Path
) -> None:
    from launcher.commands.diagnose import collect

    spec_path = tmp_path / "broken.yaml"
    spec_path.write_text("vllm: {version: 0.99.1}\n")
    up(cluster, {}, UpOptions(timeout=60, check=False, grace=2), Silent())
    unplanned = Reached(Reach.of(cluster.spec), cluster.executor)
    try:
        files = collect(unplanned, str(spec_path), {}, Silent(), lines=20, spec_problems="vllm.version: no")
    finally:
        down(unplanned, 2, Silent())
    assert files["spec-problems.txt"] == "vllm.version: no"
    assert not {"plan.json", "plan.txt", "check.json"} & set(files)
    assert '"state": "serving"' in files["status.json"]
    assert all(f"nodes/{n}/state.json" in files for n in ("n1", "n2"))
    assert status(cluster).state == "stopped"


def test_a_host_name_no_resolver_can_encode_is_an_unreachable_node_not_a_crash(tmp_path: Path) -> None:
    """A label over 63 characters makes the IDNA codec raise UnicodeError before any lookup."""
    executor = SshExecutor({"n1": "a" * 70 + ".example"})
    with pytest.raises(NodeError) as caught:
        executor.run("n1", "true")
    assert caught.value.node == "n1" and "cannot resolve" in caught.value.message
    executor.close()


def test_a_broken_spec_still_names_its_cluster_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI: the spec's problems as a warning, then the nodes (unreachable here)."""
    from launcher.cli.main import main

    data = edit(base_spec(), **{"vllm.version": "0.99.1", "nodes.0.ssh": "a" * 70, "nodes.1.ssh": "b" * 70})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit) as exit_code:
        main(["down", str(path)])
    assert exit_code.value.code == 4  # unreachable, after the warning: never 2 for this spec
    err = capsys.readouterr().err
    assert err.startswith(f"warning: {path}:") and "vllm.version: vLLM 0.99.1 has no flag catalog here" in err
    assert (
        "the spec does not plan: working from what the nodes run" in err
        and "cannot reach 2 of 2 node(s)" in err
    )


def test_each_deployment_of_a_file_that_does_not_plan_is_reached_by_its_name_and_nodes() -> None:
    from launcher.core.spec.reach import deployment_reaches

    data = edit(base_spec(), **{"vllm.version": "0.99.1", "model": None, "serve": None})
    data["deployments"] = [
        {"name": "big", "nodes": ["n2", "n1"], "model": {"path": "/m"}, "serve": {"tensor_paralel_size": 2}},
        {"name": "small", "nodes": ["n2", "nowhere"], "model": {"path": "/d"}},
        {"name": "lost", "nodes": ["nowhere"], "model": {"path": "/x"}},  # runs nowhere: left out
    ]
    found, multi, problems = deployment_reaches(data)
    assert problems == [] and multi and found is not None
    assert {n: (r.name, [x.name for x in r.nodes]) for n, r in found.items()} == {
        "big": ("t/big", ["n2", "n1"]),
        "small": ("t/small", ["n2"]),
    }
    assert deployment_reaches(edit(base_spec(), **{"vllm.version": "x"}))[0] == {
        "t": reach_of(base_spec())[0]
    }


def test_diagnose_takes_one_deployment_of_several_by_name_even_when_the_spec_does_not_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the CLI, the nodes unreachable here: the bundle still comes, each node's error in it."""
    from launcher.cli.main import main

    unresolvable = {"nodes.0.ssh": "a" * 70, "nodes.1.ssh": "b" * 70}  # no resolver takes these
    data = edit(base_spec(), **{"vllm.version": "0.99.1", "model": None, "serve": None, **unresolvable})
    data["deployments"] = [
        {"name": "big", "nodes": ["n1", "n2"], "model": {"path": "/m"}},
        {"name": "small", "nodes": ["n2"], "model": {"path": "/d"}},
    ]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as refused:
        main(["diagnose", str(path)])
    assert refused.value.code == 1
    assert "holds several deployments (big, small)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["diagnose", str(path), "--deployment", "small", "--json"])
    assert done.value.code == 4  # no node answered: the bundle holds what this machine knows
    summary = json.loads(capsys.readouterr().out)
    assert summary["nodes_failed"] == ["n2"] and "spec-problems.txt" in summary["files"]
    assert Path(summary["bundle"]).parent == Path(".")  # one file here, the deployment's name in it
    assert Path(summary["bundle"]).name.startswith("spark-launch-diagnose-t-small-")
