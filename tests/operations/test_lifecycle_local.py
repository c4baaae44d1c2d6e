"""up, status, down and failure handling through the real node agent on this machine, with
a FAKE `vllm` (tests/fakes/vllm): the edit-loop tier. The real thing is tests/e2e."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from launcher.node.cluster import Cluster
from launcher.operations.reporter import Silent
from launcher.operations.running.cluster_status import status
from launcher.operations.running.starting import StartupFailed, UpOptions, up
from launcher.operations.running.stopping import down
from tests.conftest import fake_vllm_cluster, running


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return fake_vllm_cluster(tmp_path, monkeypatch)


def test_up_waits_for_health_then_down_stops_every_rank(cluster: Cluster) -> None:
    result = up(cluster, {}, UpOptions(timeout=60, check=False, grace=2), Silent())
    try:
        assert result.started and result.model == "fake-model"
        st = status(cluster)
        assert st.state == "running" and [n.processes > 0 for n in st.nodes] == [True, True]
        again = up(cluster, {}, UpOptions(timeout=60, check=False), Silent())
        assert not again.started and "nothing to do" in again.message
    finally:
        stopped = down(cluster, 2, Silent())
    assert stopped.clean and all(r.found >= 1 for r in stopped.per_node.values())
    assert status(cluster).state == "stopped"
    assert running(cluster) == []  # seen from outside the launcher too


def test_a_rank_that_exits_is_diagnosed_and_the_others_are_stopped(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "FAKE_VLLM_FAIL",
        "AssertionError: The KV cache specs for the same layer are different "
        "across workers. This is not supported yet.",
    )
    with pytest.raises(StartupFailed) as caught:
        up(cluster, {}, UpOptions(timeout=60, check=False, grace=2), Silent())
    text = caught.value.render()
    assert "n1 (rank 0) exited with status 1" in text and "every node was stopped" in text
    assert "diagnosis: the nodes derived different KV cache specs" in text
    assert status(cluster).state == "stopped"  # the headless rank, which never fails by itself, too
    assert running(cluster) == []


def test_down_stops_every_process_of_ours_and_no_other(cluster: Cluster, tmp_path: Path) -> None:
    stranger = os.spawnlp(os.P_NOWAIT, "sleep", "sleep", "30")
    try:
        up(cluster, {}, UpOptions(timeout=60, check=False, grace=2), Silent())
        ours = running(cluster)
        assert {p.marker.split("/")[1] for p in ours if p.marker} == {"n1", "n2"}, ours
        stopped = down(cluster, 2, Silent())
        assert stopped.clean and running(cluster) == []  # every one of ours is gone, seen from outside
        os.kill(stranger, 0)  # still there: not ours
    finally:
        os.kill(stranger, 9)
        os.waitpid(stranger, 0)


def environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_down_stops_a_worker_that_dropped_the_marker_and_left_its_group(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As vLLM's workers do: no SPARK_LAUNCH_RUN in their environment. The run's session finds them."""
    pids = tmp_path / "workers"
    monkeypatch.setenv("FAKE_VLLM_WORKER", str(pids))
    lines: list[str] = []
    reporter = Silent()
    reporter.info = lines.append  # type: ignore[method-assign]
    try:
        up(cluster, {}, UpOptions(timeout=60, check=False, grace=2), Silent())
        workers = [int(p) for p in pids.read_text().split()]
        assert len(workers) == 2 and not any(b"SPARK_LAUNCH_RUN" in environ_of(w) for w in workers)
        assert all(os.getpgid(w) == w for w in workers)  # not in the leader's group either
        assert all(n.processes >= 3 for n in status(cluster).nodes)  # counted as ours
    finally:
        down(cluster, 2, reporter)
        left = [w for w in (int(p) for p in pids.read_text().split()) if not gone(w)]
        for pid in left:  # never leave one behind, even when this test fails
            os.kill(pid, signal.SIGKILL)
    assert not left
    assert len(lines) == 2 and all(line.endswith("; none left") for line in lines)


def test_health_alone_is_not_serving_a_failing_first_completion_stops_every_rank(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_COMPLETIONS_FAIL", "1")
    with pytest.raises(StartupFailed) as caught:
        up(cluster, {}, UpOptions(timeout=60, check=False, grace=2), Silent())
    assert "answers /health, but its first completion failed: HTTP 500" in caught.value.message
    assert "every node was stopped" in caught.value.message
    assert status(cluster).state == "stopped" and running(cluster) == []
