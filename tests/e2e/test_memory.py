"""The memory guard on the test bed's real nodes (the CPU build: the claim is the KV cache space
beside the weights): a plan claiming more than a node has is refused before anything starts,
with the numbers; and the page cache is dropped for real over SSH."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.load import plan_file
from launcher.node.cluster import Cluster
from launcher.node.ssh import SshExecutor
from launcher.operations.reporter import Silent
from launcher.operations.running.page_cache import drop_caches
from tests.e2e.conftest import BED, DEMO, cli, marked_processes, spec_file

pytestmark = pytest.mark.testbed


def test_the_demo_plan_fits_the_nodes(clean_demo: None) -> None:
    done = cli("check", DEMO, "--no-probe")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "claim fits the memory" in done.stdout and "CPU build" in done.stdout


def test_a_plan_claiming_more_than_a_node_has_is_refused_before_start(
    clean_demo: None, tmp_path: Path
) -> None:
    spec = spec_file(tmp_path, env={"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "4096"})
    done = cli("check", spec, "--no-probe")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "FAIL memory   claim fits the memory" in done.stdout  # the table: stdout
    assert "the plan does not fit the nodes' memory: nothing was started" in done.stderr
    said = done.stdout + done.stderr
    assert "4096.0 GiB of KV cache (VLLM_CPU_KVCACHE_SPACE=4096)" in said
    assert "lower VLLM_CPU_KVCACHE_SPACE to" in said
    refused = cli("up", spec, "--no-probe")
    assert refused.returncode == 3 and "the plan does not fit the nodes' memory" in refused.stderr
    assert marked_processes() == []


def test_the_page_cache_is_dropped_on_every_node(testbed: Path) -> None:
    spec, plan = plan_file(DEMO)
    cluster = Cluster(spec, plan, SshExecutor({n.name: n.ssh for n in spec.nodes}, str(BED / "ssh_config")))
    try:
        done = drop_caches(cluster, Silent())
    finally:
        cluster.executor.close()
    assert set(done) == {"node1", "node2"} and all(a.error is None for a in done.values()), done
    assert all(a.free_before > 0 and a.free_after > 0 for a in done.values())
