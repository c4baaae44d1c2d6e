"""The watchdog: serving, wedged or down, from /health, a 1-token completion with a deadline and
the engine's counters. The verdict is pure; the status command runs it against a FAKE vLLM
API (tests/fakes/vllm_api.py) through the real node agent. The real wedge is tests/e2e."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.core.reports import status_text
from launcher.core.serving.watchdog import DOWN, SERVING, WEDGED, Completion, Counters, counters_from, judge
from launcher.node.cluster import Cluster
from launcher.operations.reporter import Silent
from launcher.operations.running.cluster_status import status
from launcher.operations.running.starting import UpOptions, up
from launcher.operations.running.stopping import down
from tests.conftest import ROOT, base_spec, free_port, local_cluster

OK = Completion(True, 0.2)
LATE = Completion(False, 10.0, "timed out", timed_out=True)


def test_a_completion_in_time_is_serving() -> None:
    verdict = judge([], 200, OK, Counters(0, 0, 0, 10), Counters(1, 0, 0, 11), 10)
    assert verdict.state == SERVING and verdict.serving
    assert verdict.completion_seconds == 0.2 and verdict.tokens_per_second == 1.0


def test_health_fine_but_nothing_finishes_and_nothing_generates_is_wedged() -> None:
    verdict = judge([], 200, LATE, Counters(0, 0, 0, 10), Counters(10, 1, 0, 10), 10)
    assert verdict.state == WEDGED
    assert "no 1-token completion finished within 10 s" in verdict.reason
    assert "1 running, 0 waiting" in verdict.reason


def test_a_late_completion_while_tokens_flow_is_busy_not_wedged() -> None:
    verdict = judge([], 200, LATE, Counters(0, 8, 30, 10), Counters(10, 8, 30, 500), 10)
    assert verdict.state == SERVING and verdict.reason.startswith("busy:")


def test_without_counters_a_late_completion_is_still_wedged() -> None:
    assert judge([], 200, LATE, None, None, 10).state == WEDGED


@pytest.mark.parametrize(
    ("not_running", "health", "completion", "reason"),
    [
        (["n2"], 200, OK, "not running on n2"),
        ([], 503, OK, "/health answered 503"),
        ([], None, OK, "/health does not answer"),
        ([], 200, None, "no model is served"),
        ([], 200, Completion(False, 0.1, "HTTP 500: boom"), "a completion failed: HTTP 500: boom"),
    ],
)
def test_down(not_running: list[str], health: int | None, completion: Completion | None, reason: str) -> None:
    verdict = judge(not_running, health, completion, None, None, 10)
    assert verdict.state == DOWN and reason in verdict.reason


def test_the_rate_is_over_the_earlier_reading_when_given() -> None:
    verdict = judge(
        [], 200, OK, Counters(9, 0, 0, 100), Counters(10, 0, 0, 100), 10, since=Counters(0, 0, 0, 0)
    )
    assert verdict.tokens_per_second == 10.0


def test_counters_come_from_vllm_families() -> None:
    totals = {
        "vllm:num_requests_running": 2.0,
        "vllm:num_requests_waiting": 5.0,
        "vllm:generation_tokens": 7.0,
    }
    assert counters_from(totals, 3.0) == Counters(3.0, 2.0, 5.0, 7.0)
    assert counters_from({}, 3.0) is None


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    """The FAKE pair, up for the module; and the file that wedges its completions."""
    tmp_path = tmp_path_factory.mktemp("watchdog")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "vllm").symlink_to(ROOT / "tests" / "fakes" / "vllm")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("TMPDIR", str(tmp_path))
        data = base_spec("0.32.0", nodes=2)
        data["vllm"]["venv"] = str(venv)
        data["serve"]["port"] = port = free_port()
        cluster = local_cluster(data, tmp_path / "home")
        up(cluster, {}, UpOptions(timeout=60, check=False, grace=2), Silent())
        try:
            yield cluster, tmp_path / f"fake-vllm-{port}" / "wedge"
        finally:
            down(cluster, 2, Silent())


def test_status_tells_serving_then_wedged_by_the_deadline(serving: tuple[Cluster, Path]) -> None:
    cluster, wedge = serving
    first = status(cluster, deadline=5)
    assert first.serving is not None and first.serving.state == SERVING, first.serving
    assert first.counters is not None and first.counters.generated >= 1
    wedge.touch()  # from now on a completion hangs until the file goes: only the deadline ends it
    second = status(cluster, deadline=2, since=first.counters)
    assert second.serving is not None and second.serving.state == WEDGED, second.serving
    assert "no 1-token completion finished within 2 s" in second.serving.reason
    assert "WEDGED: /health is 200 but no 1-token completion" in status_text(second, time.time())
    wedge.unlink()
    assert status(cluster, deadline=5).serving.state == SERVING  # type: ignore[union-attr]


def test_status_watch_prints_a_line_per_refresh_when_piped(serving: tuple[Cluster, Path]) -> None:
    from launcher.cli.status_watch import watch_status

    cluster, _ = serving
    out = io.StringIO()
    calls = iter(range(3))

    def sleep(seconds: float) -> None:
        if next(calls) == 1:
            raise KeyboardInterrupt

    code = watch_status(cluster, 5, 0.1, False, out, sleep)
    lines = out.getvalue().splitlines()
    assert code == 0 and len(lines) == 2
    assert all(" running, serving: a 1-token completion in " in line for line in lines)


def test_status_with_a_dead_rank_is_down_and_this_test_runs_last(serving: tuple[Cluster, Path]) -> None:
    cluster, _ = serving
    cluster.agents["n2"].stop(1)
    found = status(cluster, deadline=5)
    assert found.state == "partial"
    assert found.serving is not None and found.serving.state == DOWN
    assert "not running on n2" in found.serving.reason
