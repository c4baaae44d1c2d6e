"""From the operator's machine, against the vLLM the nodes really have (real sshd, real vLLM):

- the model is visible only inside the nodes (each node's own mount view; this machine sees
  an empty directory at that path), and the spec says neither model.kind nor chunked
  prefill: the plan reads the model's config.json from the head;
- the nodes' vLLM is relabelled as a development build of the CPU release (the same code,
  another version in its dist-info, bind-mounted over it in the nodes' views): `check`
  learns its flag catalog from every node's own vLLM, a second `check` reuses it;
- `up` serves it, `verify` shows mamba align and growing prefix-cache hits;
- while it serves, the spec is broken (an unknown release; a typo): `status`, `logs`,
  `diagnose` and `down` still work, and nothing of ours is left.

One serving pair for all of it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.e2e.conftest import BED, DEMO, cli, marked_processes, only

pytestmark = [pytest.mark.testbed, pytest.mark.vllm_server]

MODEL = Path("/tmp/spark-launch-nodes-only/model")  # here: an empty directory
DEV = "0.32.1.dev3+g1234abc.cpu"  # "cpu" stays in it: vLLM's CPU build reads its platform there


def run_bed(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def dist_info() -> Path:
    site = next((BED / "vllm" / "lib").resolve().glob("python3*/site-packages"))
    (found,) = site.glob("vllm-*.dist-info")
    return found


@pytest.fixture(scope="module")
def node_views(testbed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """On both nodes only: the model at MODEL, and vLLM's dist-info saying DEV (a copy, bound over)."""
    MODEL.mkdir(parents=True, exist_ok=True)
    relabelled = tmp_path_factory.mktemp("dist") / "dist-info"
    shutil.copytree(dist_info(), relabelled)
    metadata = relabelled / "METADATA"
    metadata.write_text(re.sub(r"(?m)^Version: .*$", f"Version: {DEV}", metadata.read_text(), count=1))
    bound: list[tuple[str, Path]] = []
    try:
        for node in ("node1", "node2"):
            for source, target in ((BED / "model", MODEL), (relabelled, dist_info())):
                run_bed("bind", node, str(source), str(target))
                bound.append((node, target))
        yield
    finally:
        for node, target in reversed(bound):
            run_bed("unbind", node, str(target))
        shutil.rmtree(MODEL.parent, ignore_errors=True)


def spec_data(**vllm: str) -> dict[str, Any]:
    """The demo, with the model only on the nodes and the relabelled build, and neither model.kind
    nor prefix caching nor chunked prefill: the model's kind decides them."""
    data = yaml.safe_load(DEMO.read_text())
    data["model"]["path"] = str(MODEL)
    data["vllm"].update({"version": DEV, **vllm})
    for key in ("enable_prefix_caching", "enable_chunked_prefill"):
        data["serve"].pop(key)
    return data


def write(directory: Path, data: dict[str, Any], name: str = "cluster.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def timed(
    *args: str | Path, env: dict[str, str], timeout: float = 600
) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    done = cli(*args, env=env, timeout=timeout)
    return done, time.monotonic() - began


def rows(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {r["item"]: r for r in json.loads(done.stdout)["rows"]}


@pytest.fixture(scope="module")
def bed(node_views: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The spec, an empty operator's cache, both checks (cold, then cached), then one `up`."""
    directory = tmp_path_factory.mktemp("operator")
    env = {"XDG_CACHE_HOME": str(directory / "cache")}
    spec = write(directory, spec_data())
    cli("down", DEMO, "--grace", "5")
    offline_before = [
        cli("plan", spec, env=env),
        cli("plan", write(directory, spec_data(version="0.32.0"), "release.yaml"), env=env),
    ]
    cold, cold_s = timed("check", spec, "--json", env=env)
    warm, warm_s = timed("check", spec, "--json", env=env)
    up, up_s = timed("up", spec, "--json", env=env, timeout=900)
    found = {"spec": spec, "dir": directory, "env": env, "offline_before": offline_before}
    found.update(cold=cold, cold_s=cold_s, warm=warm, warm_s=warm_s, up=up, up_s=up_s)
    try:
        yield found
    finally:
        cli("down", spec, "--grace", "5", env=env)
        cli("down", DEMO, "--grace", "5")


def test_plan_offline_says_what_it_lacks_and_how_to_settle_it(bed: dict[str, Any]) -> None:
    build, release = bed["offline_before"]
    assert build.returncode == 2
    committed = "0.32.0, 0.33.0, 0.34.0"
    assert f"vllm.version: vLLM {DEV} has no flag catalog here (committed: {committed})" in build.stderr
    assert (
        "`spark-launch plan --from-head SPEC` learns its flags from the head node's own vLLM" in build.stderr
    )
    done = release  # a committed release: the model's kind is what it lacks
    assert done.returncode == 2
    for key in ("enable_prefix_caching", "enable_chunked_prefill"):
        assert (
            f"serve.{key}: depends on the model's kind, which the plan cannot tell ({MODEL}/config.json"
            in done.stderr
        )
    assert "plan --from-head SPEC" in done.stderr and "model.kind: decoder | hybrid" in done.stderr
    online = cli("plan", bed["dir"] / "release.yaml", "--from-head", env=bed["env"])
    assert online.returncode == 0, online.stderr
    read = re.search(r"read from node1: the model's config\.json \(([\d.]+) s\)", online.stderr)
    assert read, online.stderr
    print(f"\nthe model's config.json read from the head: {read.group(1)} s")


def test_check_reads_the_model_from_the_head_and_learns_the_builds_catalog_from_its_vllm(
    bed: dict[str, Any],
) -> None:
    cold = bed["cold"]
    assert cold.returncode == 0, cold.stdout[-3000:] + cold.stderr[-2000:]
    found = rows(cold)
    learned = found["flag catalog (this build's own)"]["values"]["node1"]
    assert learned.startswith("learned from node1, node2's own vLLM now (")
    assert (
        f"learning the flags of vLLM {DEV} (0.32.0's rules) from the own vLLM of node1, node2" in cold.stderr
    )
    head_read = re.search(
        r"read from node1: the model's config\.json and its vLLM build \(([\d.]+) s\)", cold.stderr
    )
    assert head_read, cold.stderr
    planned = next(
        r for item, r in found.items() if item.startswith("config.json as planned (read on node1: ")
    )
    assert planned["ok"] and len(set(planned["values"].values())) == 1
    assert found["vllm version"]["values"] == {"node1": DEV, "node2": DEV}
    assert found["mamba_cache_mode"]["values"] == {"node1": "align", "node2": "align"}
    assert found["enable_chunked_prefill"]["values"] == {"node1": True, "node2": True}
    assert found["vllm config hash"]["ok"]
    print(
        f"\ncheck, catalog learned from the node: {bed['cold_s']:.1f} s wall ({learned}); "
        f"the head's model files and build read in {head_read.group(1)} s"
    )


def test_a_second_check_reuses_the_learned_catalog(bed: dict[str, Any]) -> None:
    warm = bed["warm"]
    assert warm.returncode == 0, warm.stdout[-3000:]
    assert rows(warm)["flag catalog (this build's own)"]["values"] == {
        "node1": "learned from node1, node2's own vLLM earlier (cached)"
    }
    assert "learning the flags" not in warm.stderr
    print(f"\ncheck, catalog from the operator's cache: {bed['warm_s']:.1f} s wall")


def test_plan_offline_then_plans_with_what_was_read_and_learned(bed: dict[str, Any]) -> None:
    done = cli("plan", bed["spec"], "--json", env=bed["env"])
    assert done.returncode == 0, done.stderr
    plan = only(done.stdout)
    assert plan["notes"][0].startswith(
        f"vLLM {DEV} is a development build toward 0.32.1, after release 0.32.0"
    )
    assert "flags and model traits: the catalog learned from node1, node2's own vLLM" in plan["notes"][1]
    model = next(d for d in plan["derived"] if d["setting"] == "model")
    assert model["value"].startswith("hybrid (Qwen3NextForCausalLM)")
    assert "(as read earlier, kept on this machine)" in model["reason"]
    assert "--mamba-cache-mode=align" in plan["nodes"][1]["argv"]  # 0.32's rules: the flag is live
    online = cli("plan", bed["spec"], "--from-head", "--json", env=bed["env"])
    assert online.returncode == 0 and only(online.stdout)["digest"] == plan["digest"]
    assert "read from node1: the model's config.json and its vLLM build" in online.stderr


def test_up_serves_and_verify_shows_mamba_align_and_growing_prefix_hits(bed: dict[str, Any]) -> None:
    up = bed["up"]
    assert up.returncode == 0, up.stderr[-3000:]
    assert only(up.stdout)["model"] == "tiny-qwen3-next"
    done = cli("verify", bed["spec"], "--json", env=bed["env"], timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = only(done.stdout)
    assert result["cache_config"]["mamba_cache_mode"] == "align"
    hits = result["prefix_cache_hits_after_each_send"]
    assert hits[-1] > hits[0] >= 0 and hits[-1] % int(result["cache_config"]["block_size"]) == 0
    print(f"\nup (catalog cached, probe cached): {bed['up_s']:.1f} s wall")


def test_while_it_serves_a_broken_spec_still_shows_and_stops_it(bed: dict[str, Any]) -> None:
    unknown = spec_data(version="0.99.1")
    typo = spec_data()
    typo["serve"]["tensor_paralel_size"] = 2
    for name, data in (("unknown.yaml", unknown), ("typo.yaml", typo)):
        broken = write(bed["dir"], data, name)
        done = cli("status", broken, "--json", env=bed["env"])
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stderr.startswith(f"warning: {broken}:")
        assert "the spec does not plan: working from what the nodes run" in done.stderr
        status = only(done.stdout)
        assert status["state"] == "running" and status["plan"] is None and status["health"] == 200
        assert status["serving"]["state"] == "serving"
        logs = cli("logs", broken, "-n", "2", env=bed["env"])
        assert logs.returncode == 0 and len(logs.stdout.splitlines()) == 4
    assert (
        "vllm.version: vLLM 0.99.1 has no flag catalog here"
        in cli("status", bed["dir"] / "unknown.yaml").stderr
    )
    bundle = bed["dir"] / "bundle.tar.gz"
    diagnosed = cli("diagnose", bed["dir"] / "typo.yaml", "-o", bundle, "--json", "-n", "20", env=bed["env"])
    assert diagnosed.returncode == 0, diagnosed.stdout + diagnosed.stderr
    parts = json.loads(diagnosed.stdout)
    assert "spec-problems.txt" in parts["files"] and "plan.json" not in parts["files"]
    assert parts["nodes_failed"] == [] and "status.json" in parts["files"]
    down = cli("down", bed["dir"] / "typo.yaml", env=bed["env"])
    assert down.returncode == 0, down.stderr
    assert "node1: stopped" in down.stderr and "node2: stopped" in down.stderr
    assert marked_processes() == []
    after = only(cli("status", bed["spec"], "--json", env=bed["env"]).stdout)
    assert after["state"] == "stopped"
