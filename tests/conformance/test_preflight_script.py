"""The collective preflight script, as it is sent, under the Python (and torch) of each supported
vLLM release: two ranks on this machine's loopback prove their connections and run a timed gloo
all-reduce; a rank that nobody joins answers at its deadline, naming where it stood."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from launcher.core.checks.connections import preflight_requests
from tests.conformance.conftest import RELEASES, unit_file, venv_for
from tests.conftest import base_spec, plan_of

pytestmark = pytest.mark.conformance

ENV = {"VLLM_HOST_IP": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo", "PATH": "/usr/bin:/bin", "HOME": "/tmp"}


def request(rank: int, port: int = 0, deadline: float = 30, group: float = 10) -> dict[str, Any]:
    return {
        "rank": rank,
        "nodes": [{"name": "a", "address": "127.0.0.1"}, {"name": "b", "address": "127.0.0.1"}],
        "master": "127.0.0.1",
        "port": port,
        "connect": [1 - rank],
        "backends": ["gloo"],
        "deadline": deadline,
        "connect_timeout": 3,
        "group_timeout": group,
        "bytes": {"gloo": 1 << 20},
        "rounds": [5, 2],
    }


@contextmanager
def preflight(venv: Path, ask: dict[str, Any], tmp_path: Path, **env: str) -> Iterator[subprocess.Popen[str]]:
    argv = [
        str(venv / "bin" / "python"),
        str(unit_file()),
        "preflight",
        str(tmp_path / "run"),
        json.dumps(ask),
    ]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env={**ENV, **env}
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def lines_until(proc: subprocess.Popen[str], key: str) -> dict[str, Any]:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{") and key in (data := json.loads(line)):
            return dict(data)
    raise AssertionError(f"the preflight ended without a line holding {key!r}")


@pytest.mark.parametrize("version", RELEASES)
def test_two_ranks_prove_their_connections_and_time_a_gloo_all_reduce(version: str, tmp_path: Path) -> None:
    venv = venv_for(version)
    with preflight(venv, request(0), tmp_path) as head:
        port = lines_until(head, "port")["port"]
        with preflight(venv, request(1, port), tmp_path) as worker:
            answers = [lines_until(head, "ok"), lines_until(worker, "ok")]
    for got, peer in zip(answers, "ba", strict=True):
        assert got["ok"] and got["reached"] == {peer: "ok"}, got
        figures = got["figures"]["gloo"]
        assert figures["latency_us"] > 0 and figures["busbw_gbps"] > 0 and figures["bytes"] == 1 << 20


@pytest.mark.parametrize("version", RELEASES)
def test_three_ranks_asked_as_the_plan_asks_them_all_connect_and_agree(version: str, tmp_path: Path) -> None:
    data = base_spec(nodes=3)
    for node in data["nodes"]:
        node["address"] = "127.0.0.1"
    requests = list(preflight_requests(plan_of(data), "gloo", 0).values())
    venv = venv_for(version)
    with contextlib.ExitStack() as stack:
        head = stack.enter_context(preflight(venv, requests[0], tmp_path))
        port = lines_until(head, "port")["port"]
        others = [stack.enter_context(preflight(venv, {**r, "port": port}, tmp_path)) for r in requests[1:]]
        answers = [lines_until(proc, "ok") for proc in [head, *others]]
    assert [a["ok"] for a in answers] == [True] * 3, answers
    assert [sorted(a["reached"]) for a in answers] == [["n2", "n3"], ["n1"], ["n1", "n2"]]
    assert all(a["figures"]["gloo"]["bytes"] == 16 << 20 for a in answers)


@pytest.mark.parametrize("version", RELEASES)
def test_a_rank_nobody_joins_answers_at_its_deadline_saying_what_it_waited_for(
    version: str, tmp_path: Path
) -> None:
    with preflight(venv_for(version), request(0, deadline=4, group=60), tmp_path) as head:
        lines_until(head, "port")
        began = time.monotonic()
        got = lines_until(head, "ok")
        head.wait(10)
    assert not got["ok"] and got["timed_out"] and got["stage"] == "connections"
    assert "waiting for b to listen" in got["error"]
    assert time.monotonic() - began < 10 and head.returncode == 1


@pytest.mark.parametrize("version", RELEASES)
def test_a_rank_that_fails_tells_the_others_which_stop_at_once_naming_it(
    version: str, tmp_path: Path
) -> None:
    venv = venv_for(version)
    with preflight(venv, request(0, group=60), tmp_path) as head:
        port = lines_until(head, "port")["port"]
        # VLLM_HOST_IP is not an address of this machine: the worker cannot listen there.
        with preflight(venv, request(1, port, group=60), tmp_path, VLLM_HOST_IP="192.0.2.1") as worker:
            failed = lines_until(worker, "ok")
            began = time.monotonic()
            told = lines_until(head, "ok")
    assert not failed["ok"] and "cannot listen on 192.0.2.1 (VLLM_HOST_IP)" in failed["error"]
    assert not told["ok"] and "waiting for b to listen: b failed (connections: cannot listen" in told["error"]
    assert time.monotonic() - began < 5  # not the group's 60 s


def listeners(port: int) -> list[str]:
    """The local addresses listening on TCP `port` on this machine (`ss`)."""
    done = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True)
    return sorted({line.split()[3].rsplit(":", 1)[0] for line in done.stdout.splitlines() if line.strip()})


@pytest.mark.parametrize("version", RELEASES)
def test_the_heads_store_listens_on_the_master_address_alone(version: str, tmp_path: Path) -> None:
    """torch's own store binds every interface whatever address it is given; the preflight's
    binds the master address only (anyone reaching the store could forge a pass)."""
    venv = venv_for(version)
    with preflight(venv, request(0, deadline=15), tmp_path) as head:
        port = lines_until(head, "port")["port"]
        assert port > 0 and listeners(port) == ["127.0.0.1"], listeners(port)
