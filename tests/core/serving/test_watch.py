"""Reading vLLM's logs: start-up stages, and the known failures with their fixes (lines as
vLLM 0.32 really prints them on the test bed)."""

from __future__ import annotations

import pytest

from launcher.core.serving.startup_log import STAGE_NAMES, NodeWatch, diagnose, stage_of
from tests.conftest import ROOT

# Lines a real head printed while starting on the test bed (vLLM 0.32, shortened).
HEAD_START = (ROOT / "tests" / "data" / "head-start.log").read_text()


def test_stages_advance_line_by_line() -> None:
    seen = [STAGE_NAMES[stage_of("\n".join(HEAD_START.splitlines()[: i + 1]))] for i in range(7)]
    assert seen == [
        "configuring",
        "rendezvous",
        "rendezvous",
        "loading weights",
        "KV cache",
        "KV cache",
        "API up",
    ]


def test_a_watch_only_moves_forward_and_keeps_a_tail() -> None:
    watch = NodeWatch("node1", 0)
    assert watch.feed(HEAD_START, len(HEAD_START)) and watch.stage_name == "API up"
    assert not watch.feed("(APIServer) INFO non-default args again\n", len(HEAD_START) + 40)
    assert watch.stage_name == "API up" and watch.offset == len(HEAD_START) + 40
    assert watch.tail[-1].startswith("(APIServer) INFO non-default")


@pytest.mark.parametrize(
    ("line", "title"),
    [
        (
            "AssertionError: The KV cache specs for the same layer are different across workers. This is not "
            "supported yet.",
            "different KV cache specs",
        ),
        (
            "[gloo/transport/tcp/debug_logger.cc:9] ERROR failed to connect, rank=1, size=2, "
            "error=SO_ERROR: Connection refused, remote=[127.0.0.1]:9649 Gloo connectFullMesh failed",
            "Gloo",
        ),
        (
            "zmq.error.ZMQError: Cannot assign requested address (addr='tcp://10.99.0.7:0')",
            "does not hold the address",
        ),
        ("    OSError: [Errno 98] Address already in use", "port is already in use"),
        (
            "OSError: Can't load the configuration of '/models/x'. If you were trying to load it",
            "model was not found",
        ),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "ran out of memory"),
        ("spark-launch-demo: line 1: /opt/vllm/bin/vllm: No such file or directory", "vLLM is not installed"),
        (
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, ncclSystemError",
            "NCCL",
        ),
    ],
)
def test_known_failures_are_named_with_their_evidence(line: str, title: str) -> None:
    found = diagnose(f"some noise\n{line}\nmore noise\n")
    assert found is not None and title in found.title
    assert found.evidence == line.strip()[:300] and found.hint


def test_a_kill_by_the_oom_killer_is_named_from_the_exit_status() -> None:
    found = diagnose("nothing telling\n", exit_code=137)
    assert found is not None and "status 137" in found.title


def test_an_unknown_failure_is_not_guessed() -> None:
    assert diagnose("RuntimeError: something new\n", exit_code=1) is None
