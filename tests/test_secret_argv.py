"""A secret's value reaches vLLM's environment and no command line: not the start wrapper's
(`ps` on a node shows every word of it to every user), nor any command the launcher sends
(over SSH it becomes the argv of the node's shell). Through the real node scripts with a
FAKE vllm (tests/fakes/vllm), seen from outside the launcher (/proc)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from launcher.commands.down import down
from launcher.commands.reporter import Silent
from launcher.commands.up import UpOptions, up
from launcher.node.cluster import Cluster
from launcher.node.executor import Executor, Result, Stream
from tests.conftest import fake_vllm_cluster, running

SECRET = "sk-planted-" + secrets.token_hex(8)


class Recording:
    """An executor that notes every shell command it is given, then hands it on."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.commands: list[str] = []

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        self.commands.append(command)
        return self.inner.run(node, command, stdin, timeout)

    def stream(
        self, node: str, command: str, on_line: Callable[[str], None], stdin: str | None = None
    ) -> Result:
        self.commands.append(command)
        return self.inner.stream(node, command, on_line, stdin)

    def open(self, node: str, command: str) -> Stream:
        self.commands.append(command)
        return self.inner.open(node, command)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Cluster, Recording]:
    local = fake_vllm_cluster(tmp_path, monkeypatch, secrets=["SPARK_TEST_TOKEN"])
    recording = Recording(local.executor)
    return Cluster(local.spec, local.plan, recording), recording  # type: ignore[arg-type]


def environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def test_a_secret_reaches_vllm_and_no_command_line(cluster: tuple[Cluster, Recording]) -> None:
    served, recording = cluster
    up(served, {"SPARK_TEST_TOKEN": SECRET}, UpOptions(timeout=60, check=False, grace=2), Silent())
    try:
        ours = running(served)
        assert [p for p in ours if SECRET.encode() in environ(p.pid)], ours  # delivered
        assert [p.args for p in ours if SECRET in p.args] == []  # the wrapper, vllm and its children
        assert recording.commands and [c for c in recording.commands if SECRET in c] == []
    finally:
        down(served, 2, Silent())
    assert running(served) == []
