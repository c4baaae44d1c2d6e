"""The collective preflight's plan and its rows: which connections vLLM opens, in which
direction, what each node is asked, and what a failure says. The script itself runs for real
in tests/conformance/test_preflight_script.py and on the test bed in tests/e2e/test_fabric.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from launcher.core.answers.preflight_answer import PreflightAnswer, Serving, preflight_line
from launcher.core.answers.read import BadAnswer
from launcher.core.checks import Row
from launcher.core.checks.collective_rows import preflight_rows
from launcher.core.checks.connections import preflight_requests, vllm_connections
from launcher.core.remote import preflight_call
from launcher.node.scripts import bundle
from launcher.operations.gathering.preflight_run import _Run
from tests.conftest import base_spec, edit, plan_of, spec_of


def pairs(data: dict[str, object], nccl: bool = False) -> dict[tuple[str, str], tuple[str, ...]]:
    return {(c.source, c.target): c.uses for c in vllm_connections(plan_of(data), nccl)}


def test_the_head_connects_into_every_worker_and_the_workers_into_the_head() -> None:
    assert pairs(base_spec()) == {
        ("n2", "n1"): ("scheduler queue", "gloo"),
        ("n1", "n2"): ("worker queue",),
    }


def test_gloo_is_opened_by_the_side_with_the_greater_address() -> None:
    swapped = edit(base_spec(), **{"nodes.0.address": "10.0.0.9"})
    assert pairs(swapped) == {("n2", "n1"): ("scheduler queue",), ("n1", "n2"): ("worker queue", "gloo")}


def test_nccl_adds_its_bootstrap_both_ways_and_its_ring() -> None:
    three = base_spec(nodes=3)
    found = pairs(three, nccl=True)
    assert found[("n1", "n3")] == ("worker queue", "nccl bootstrap")
    assert found[("n3", "n1")] == ("scheduler queue", "gloo", "nccl bootstrap", "nccl ring")
    assert found[("n2", "n3")] == ("nccl ring",)
    assert ("n3", "n2") in found and found[("n3", "n2")] == ("gloo",)


def test_each_node_is_asked_to_reach_exactly_the_nodes_vllm_connects_to_from_it() -> None:
    requests = preflight_requests(plan_of(base_spec()), "gloo", 41234)
    assert requests["n2"]["port"] == 41234 and requests["n2"]["master"] == "10.0.0.1"
    assert (requests["n1"]["connect"], requests["n2"]["connect"]) == ([1], [0])
    assert requests["n2"]["backends"] == ["gloo"] and requests["n2"]["deadline"] > 0


def test_the_preflight_runs_under_the_nodes_vllm_python_with_the_plans_env() -> None:
    spec = spec_of(base_spec())
    node = plan_of(base_spec()).nodes[1]
    call = preflight_call(spec, node, "~/.spark-launch/t/n2", {"rank": 1})
    assert call.script == "preflight" and call.command.startswith("/opt/vllm/bin/python -c ")
    # The environment travels on stdin ahead of the script, as the probe's does: no value in argv.
    assert json.loads(str(call.data)) == node.env and "10.0.0.2" not in call.command
    assert " preflight " in call.command and call.command.endswith(" 2>&1")
    assert "vllm serve" not in call.command


def answer(**fields: object) -> PreflightAnswer:
    return PreflightAnswer.parse({"ok": True, "stage": "done", **fields})


FIGURES = {"gloo": {"latency_us": 150.0, "busbw_gbps": 1.25, "bytes": 16 << 20}}


def rows(answers: dict[str, PreflightAnswer]) -> dict[str, Row]:
    plan = plan_of(base_spec())
    return {r.item: r for r in preflight_rows(plan, vllm_connections(plan, False), ("gloo",), answers)}


def test_a_clean_fabric_passes_with_its_latency_and_bandwidth() -> None:
    found = rows(
        {
            "n1": answer(reached={"n2": "ok"}, figures=FIGURES),
            "n2": answer(reached={"n1": "ok"}, figures=FIGURES),
        }
    )
    assert all(r.ok for r in found.values())
    assert found["gloo all-reduce (2 nodes)"].values == {"n1": "150 us, 1.25 GB/s", "n2": "150 us, 1.25 GB/s"}


def test_a_worker_that_drops_the_heads_connections_is_named_with_the_fix() -> None:
    failed = {
        "ok": False,
        "stage": "connections",
        "error": "connections vLLM needs fail: n1 -> n2: timed out",
    }
    found = rows(
        {
            "n1": PreflightAnswer.parse({**failed, "reached": {"n2": "timed out"}}),
            "n2": PreflightAnswer.parse({**failed, "reached": {"n1": "ok"}}),
        }
    )
    row = found["n1 -> n2 (worker queue)"]
    assert row.failed and row.values == {"n1": "timed out"}
    assert "n2 must accept TCP from n1 (10.0.0.1)" in row.hint
    assert found["n2 -> n1 (scheduler queue, gloo)"].ok
    collective = found["gloo all-reduce (2 nodes)"]
    assert not collective.ok and not collective.failed


def test_a_collective_that_fails_after_the_connections_blocks_with_each_nodes_cause() -> None:
    stuck = PreflightAnswer.parse(
        {"ok": False, "stage": "gloo", "error": "no progress within 40 s at gloo", "reached": {"n2": "ok"}}
    )
    found = rows({"n1": stuck, "n2": answer(reached={"n1": "ok"}, figures=FIGURES)})
    row = found["gloo all-reduce (2 nodes)"]
    assert row.failed and row.values["n1"] == "gloo: no progress within 40 s at gloo"


def test_a_preflight_that_ends_without_an_answer_says_where_it_stood() -> None:
    run = _Run()
    run.on_event(
        preflight_line({"event": "stage", "stage": "rendezvous", "detail": "connecting to 10.0.0.1:4242"})
    )
    for line in ["Traceback (most recent call last):", "RuntimeError: boom"]:
        run.on_other(line)
    run.done.set()  # the stream ended
    result = run.result()
    assert not result.ok and result.stage == "rendezvous (connecting to 10.0.0.1:4242)"
    assert result.error == "ended without an answer: Traceback (most recent call last): / RuntimeError: boom"


def test_a_node_still_waiting_when_the_others_answered_says_where_it_waits_and_what_it_reached() -> None:
    run = _Run()
    run.on_event(preflight_line({"event": "reached", "reached": {"n2": "ok"}}))
    run.on_event(
        preflight_line({"event": "stage", "stage": "gloo", "detail": "process group across 2 nodes"})
    )
    result = run.result()
    assert (result.stage, result.error, result.reached) == (
        "gloo (process group across 2 nodes)",
        "still waiting when every other node had answered",
        {"n2": "ok"},
    )


def test_the_heads_store_port_is_found_with_the_nodes_own_python3_without_torch(tmp_path: Path) -> None:
    done = subprocess.run(
        ["python3", "-", "preflight", str(tmp_path), "port", "127.0.0.1"],
        input=bundle("preflight"),
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(done.stdout)
    assert answer["ok"] and 0 < answer["port"] < 65536


def test_the_preflights_lines_are_read_as_events_and_its_answer() -> None:
    assert preflight_line({"event": "listening", "port": 41234}) == Serving(41234)
    got = preflight_line(
        {"ok": True, "stage": "done", "reached": {"n2": "ok"}, "figures": FIGURES, "seconds": 2.5}
    )
    assert (
        isinstance(got, PreflightAnswer) and got.figures["gloo"]["busbw_gbps"] == 1.25 and got.seconds == 2.5
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ({"event": "reboot"}, "'reboot' is not one of"),
        ({"ok": "yes", "stage": "done"}, "ok: expected true or false"),
        ({"ok": True, "stage": "done", "reached": {"n2\x1b[2J": "ok"}}, "control character"),
        ({"ok": True, "stage": "done", "figures": {"gloo": {"latency_us": "fast"}}}, "expected a number"),
        ({"ok": True, "stage": "done", "figures": {"mpi": {}}}, "'mpi' is not one of gloo, nccl"),
        ({"event": "listening", "port": 70000}, "out of range"),
    ],
)
def test_a_malformed_preflight_line_is_refused_saying_where_and_what(line: object, expected: str) -> None:
    with pytest.raises(BadAnswer) as caught:
        preflight_line(line)
    assert expected in str(caught.value)
