"""What a node's facts call and copies open (fast tier: real sockets, the real OpenSSH client
here, no SSH connection made): a worker's connection to the head inside its facts call, the
slow tools that call asks run side by side, and the remote shell of the node-to-node copies,
AES-GCM first unless a configuration chose."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from launcher.core.answers.facts_answer import Facts, facts
from launcher.node.scripts import bundle, net, rsh
from tests.node_scripts import HANG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def facts_here(directory: Path, request: dict[str, Any], env: dict[str, str] | None = None) -> Facts:
    """The facts script's answer, run here as a node runs it, read by the launcher's reader."""
    done = subprocess.run(
        ["python3", "-S", "-", "check_facts", str(directory), json.dumps(request)],
        input=bundle("check_facts"),
        capture_output=True,
        text=True,
        timeout=HANG,
        check=True,
        env=env,
    )
    return facts(json.loads(done.stdout.splitlines()[-1]))


def test_a_worker_connects_once_the_head_listens_after_it_began() -> None:
    port = free_port()
    began = threading.Event()
    came: list[str] = []

    def head() -> None:
        began.wait()
        said, thread = net.listener("127.0.0.1", port, 1, 30)
        assert said["listening"], said
        thread.join()
        came.extend(said["peers"])

    server = threading.Thread(target=head)
    server.start()
    result = net.connector("127.0.0.1", port, 30)  # refused at first: nothing listens yet
    began.set()
    assert result() == "yes"
    server.join()
    assert came == ["127.0.0.1"]


def test_a_head_that_never_listens_is_said_so_at_the_deadline() -> None:
    assert net.connector("127.0.0.1", free_port(), 0.3)() == "Connection refused"


def test_a_workers_facts_call_connects_to_the_head_and_answers_how_it_went(tmp_path: Path) -> None:
    """The facts script, run as a node runs it, with a worker's request: one call, both answers."""
    port = free_port()
    said, thread = net.listener("127.0.0.1", port, 1, 60)
    assert said["listening"], said
    request = {
        "venv": str(tmp_path / "no-venv"),
        "interface": "lo",
        "address": "127.0.0.1",
        "connect": {"address": "127.0.0.1", "port": port, "seconds": 30},
    }
    answer = facts_here(tmp_path, request)
    thread.join()
    assert answer["connected"] == "yes" and said["peers"] == ["127.0.0.1"]
    assert answer["network"]["holds_address"]  # and the facts themselves, in the same answer


FAKE_SMI = """#!/bin/sh
# FAKE nvidia-smi (no GPU here): each of the facts call's three queries says it started, then
# waits (at most 10 s) until the other two started too: one after the other, they never would.
touch "$STARTS/$$"
n=0
while [ "$(ls "$STARTS" | wc -l)" -lt 3 ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
[ "$(ls "$STARTS" | wc -l)" -ge 3 ] || exit 1
case "$1" in
  -q) printf 'Driver Version                            : 580.95.05\nCUDA Version : 13.0\n' ;;
  *) echo "NVIDIA GB10, [N/A], [N/A], 580.95.05" ;;
esac
"""


def test_the_facts_calls_nvidia_smi_queries_run_side_by_side(tmp_path: Path) -> None:
    tools, starts = tmp_path / "bin", tmp_path / "starts"
    tools.mkdir()
    starts.mkdir()
    (tools / "nvidia-smi").write_text(FAKE_SMI)
    (tools / "nvidia-smi").chmod(0o755)
    request = {"venv": str(tmp_path / "no-venv"), "interface": "lo", "address": "127.0.0.1"}
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "STARTS": str(starts)}
    answer = facts_here(tmp_path, request, env)
    assert len(list(starts.iterdir())) == 3  # each query once
    assert answer["host"]["gpus"] == ["NVIDIA GB10, [N/A], [N/A], 580.95.05"]
    assert answer["host_details"]["nvidia"]["cuda"] == "13.0"
    assert [g["name"] for g in answer["memory"]["gpus"] or []] == ["NVIDIA GB10"]


@pytest.fixture
def ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user config and no $RSYNC_RSH: the remote shell is the job's default (OpenSSH's
    client, which the test bed needs too: scripts/system-deps.sh installs it)."""
    monkeypatch.delenv("RSYNC_RSH", raising=False)
    config = tmp_path / "ssh_config"
    config.write_text("")
    return config


def test_a_remote_shell_whose_ciphers_nothing_chose_puts_aes_gcm_first(ssh_config: Path) -> None:
    words = rsh.remote_shell({"default_rsh": f"ssh -F {ssh_config} -o BatchMode=yes"})
    fast = rsh.fast_shell(words, "10.0.0.2")
    assert fast[:2] == ["ssh", "-o"] and fast[3:] == words[1:]
    offered = fast[2].removeprefix("Ciphers=").split(",")
    assert offered[:2] == list(rsh.FAST)
    assert sorted(offered) == sorted(rsh._ciphers(words, "10.0.0.2") or [])  # the same ciphers, reordered


@pytest.mark.parametrize(
    ("config", "extra"),
    [
        ("Host *\n    Ciphers chacha20-poly1305@openssh.com,aes256-ctr\n", ""),  # the user's choice
        ("", "-c aes256-ctr"),  # the remote shell's own
        ("", "-o Ciphers=aes256-ctr"),
    ],
)
def test_a_remote_shell_whose_ciphers_were_chosen_is_used_as_it_is(
    ssh_config: Path, config: str, extra: str
) -> None:
    ssh_config.write_text(config)
    words = rsh.remote_shell({"default_rsh": f"ssh -F {ssh_config} {extra}".strip()})
    assert rsh.fast_shell(words, "10.0.0.2") == words


def test_a_remote_shell_that_is_not_ssh_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSYNC_RSH", "/opt/tools/tunnel --fast")
    words = rsh.remote_shell({"default_rsh": "ssh"})
    assert words == ["/opt/tools/tunnel", "--fast"] and rsh.fast_shell(words, "h") == words
