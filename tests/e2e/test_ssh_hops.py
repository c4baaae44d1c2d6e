"""Every ProxyJump hop's host key is checked by the final host's rules, on the real test bed.

node2 is reached through node1 (ProxyJump); each Host block names its own known_hosts
file, as an operator's ssh_config would. A hop whose key is unknown or changed is refused,
naming the hop, exactly as the final host would be.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.node.executor import NodeError
from launcher.node.ssh import SshExecutor
from tests.e2e.conftest import BED

pytestmark = pytest.mark.testbed


def config(tmp_path: Path, jump_known: str) -> str:
    """An ssh_config reaching node2 through node1; node1's keys from `jump_known`."""
    (tmp_path / "jump_known_hosts").write_text(jump_known)
    common = [
        "    User root",
        f"    IdentityFile {BED / 'id_ed25519'}",
        "    IdentitiesOnly yes",
        "    StrictHostKeyChecking yes",
        "    BatchMode yes",
    ]
    path = tmp_path / "ssh_config"
    path.write_text(
        "\n".join(
            [
                "Host jump",
                "    HostName 10.99.0.1",
                f"    UserKnownHostsFile {tmp_path / 'jump_known_hosts'}",
                *common,
                "Host behind",
                "    HostName 10.99.0.2",
                "    ProxyJump jump",
                f"    UserKnownHostsFile {BED / 'known_hosts'}",
                *common,
            ]
        )
        + "\n"
    )
    return str(path)


def node1_key() -> str:
    """node1's host key line from the bed's known_hosts (listed under its alias and address)."""
    line = next(x for x in (BED / "known_hosts").read_text().splitlines() if x.startswith("node1,"))
    return "10.99.0.1 " + line.split(" ", 1)[1] + "\n"


def run_behind(ssh_config: str) -> str:
    executor = SshExecutor({"n2": "behind"}, ssh_config, connect_timeout=5)
    try:
        return executor.run("n2", "cat /proc/sys/kernel/hostname; echo via-jump").stdout
    finally:
        executor.close()


def test_a_hop_with_a_known_key_is_used(testbed: Path, tmp_path: Path) -> None:
    assert run_behind(config(tmp_path, node1_key())).endswith("via-jump\n")


def test_a_hop_whose_key_is_unknown_is_refused_naming_it(testbed: Path, tmp_path: Path) -> None:
    with pytest.raises(NodeError) as caught:
        run_behind(config(tmp_path, ""))
    known = tmp_path / "jump_known_hosts"
    assert caught.value.node == "n2"
    assert caught.value.reason == (
        f"the ProxyJump hop jump: the host key of root@10.99.0.1:22 is not in {known}: refusing to connect"
    )
    assert f"ssh-keyscan -p 22 10.99.0.1 >> {known}" in str(caught.value.hint)


def test_a_hop_whose_key_changed_is_refused_naming_it(testbed: Path, tmp_path: Path) -> None:
    other = next(x for x in (BED / "known_hosts").read_text().splitlines() if x.startswith("node2,"))
    with pytest.raises(NodeError) as caught:
        run_behind(config(tmp_path, "10.99.0.1 " + other.split(" ", 1)[1] + "\n"))
    known = tmp_path / "jump_known_hosts"
    assert caught.value.reason == (
        f"the ProxyJump hop jump: the host key of root@10.99.0.1:22 has CHANGED since it was recorded in "
        f"{known}: refusing to connect"
    )
    assert f"ssh-keygen -f {known} -R '10.99.0.1'" in str(caught.value.hint)
