"""SSH failures against real local servers: fast (within the ssh_config's ConnectTimeout, or
--connect-timeout), in words with the fix (the known_hosts really in use, the `ssh -F` line),
never the library's own text; every unreachable node named, each tried once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from launcher.errors import ExitStatus, InputError
from launcher.node.executor import NodeError
from launcher.node.ssh import SshExecutor
from tests.ssh_servers import (
    closed_port,
    known_hosts_line,
    listening,
    new_key,
    ssh_config,
    ssh_server,
    write_key,
)

# What paramiko and sockets say; none of it may reach the user.
LIBRARY_TEXT = (
    "No existing session",
    "Error reading SSH protocol banner",
    "not found in known_hosts",
    "Authentication failed.",
    "Indecipherable",
    "node node",
)


def failure(executor: SshExecutor, node: str) -> NodeError:
    with pytest.raises(NodeError) as caught:
        executor.run(node, "true")
    assert not any(text in caught.value.render() for text in LIBRARY_TEXT), caught.value.render()
    return caught.value


def test_a_host_that_accepts_and_never_speaks_fails_within_the_ssh_configs_connect_timeout(
    tmp_path: Path,
) -> None:
    with listening() as silent:
        config = ssh_config(tmp_path / "config", {"silent": silent.port}, ConnectTimeout="1")
        error = failure(SshExecutor({"n1": "silent"}, str(config)), "n1")
    assert error.reason == (
        f"tester@127.0.0.1:{silent.port} accepted the connection but did not complete an SSH handshake "
        "within 1 s"
    )
    assert f"`ssh -F {config} -v silent true` shows where it stops" in str(error.hint)
    assert silent.connections == 1


def test_connect_timeout_overrides_the_ssh_config(tmp_path: Path) -> None:
    with listening() as silent:
        config = ssh_config(tmp_path / "config", {"silent": silent.port}, ConnectTimeout="30")
        error = failure(SshExecutor({"n1": "silent"}, str(config), connect_timeout=0.5), "n1")
    assert error.reason.endswith("within 0.5 s")


def test_a_port_that_answers_another_protocol_and_hangs_up_is_said_so_at_once(tmp_path: Path) -> None:
    with listening(b"HTTP/1.0 400 Bad Request\r\n\r\n") as web:
        config = ssh_config(tmp_path / "config", {"web": web.port}, ConnectTimeout="60")
        error = failure(SshExecutor({"n1": "web"}, str(config)), "n1")
    assert error.reason == f"tester@127.0.0.1:{web.port} closed the connection during the SSH handshake"
    assert str(error.hint).startswith("is it sshd on that port (HostName and Port in the ssh_config)?")


def test_a_closed_port_is_refused_at_once(tmp_path: Path) -> None:
    port = closed_port()
    config = ssh_config(tmp_path / "config", {"gone": port})
    error = failure(SshExecutor({"n1": "gone"}, str(config)), "n1")
    assert error.reason == f"connection refused by tester@127.0.0.1:{port}"
    assert error.hint == f"is sshd running there, on port {port}? `ssh -F {config} gone true` tests it"


def test_a_target_with_user_and_port_keeps_both_in_the_ssh_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config: the line names none
    port = closed_port()
    error = failure(SshExecutor({"n1": f"admin@127.0.0.1:{port}"}), "n1")
    assert error.reason == f"connection refused by admin@127.0.0.1:{port}"
    assert error.hint == (
        f"is sshd running there, on port {port}? `ssh -p {port} admin@127.0.0.1 true` tests it"
    )
    with listening() as silent:
        slow = failure(SshExecutor({"n1": f"admin@127.0.0.1:{silent.port}"}, None, 0.3), "n1")
    assert f"`ssh -v -p {silent.port} admin@127.0.0.1 true` shows where it stops" in str(slow.hint)


def test_an_unknown_host_key_names_the_known_hosts_in_use_and_the_ssh_line_that_accepts_it(
    tmp_path: Path,
) -> None:
    known = tmp_path / "known_hosts"
    with ssh_server(new_key(), new_key()) as server:
        config = ssh_config(
            tmp_path / "config", {"spark-1": server.port}, UserKnownHostsFile=str(known), BatchMode="yes"
        )
        error = failure(SshExecutor({"n1": "spark-1"}, str(config)), "n1")
    assert (
        error.reason
        == f"the host key of tester@127.0.0.1:{server.port} is not in {known}: refusing to connect"
    )
    assert error.hint == (
        f"check its fingerprint, then accept it: ssh -F {config} -o BatchMode=no spark-1 true (answer yes), "
        f"or ssh-keyscan -p {server.port} 127.0.0.1 >> {known}"
    )


def test_a_changed_host_key_names_the_line_to_remove(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    with ssh_server(new_key(), new_key()) as server:
        known.write_text(known_hosts_line(server.port, new_key()))  # another key than the server's
        config = ssh_config(tmp_path / "config", {"spark-1": server.port}, UserKnownHostsFile=str(known))
        error = failure(SshExecutor({"n1": "spark-1"}, str(config)), "n1")
    assert error.reason == (
        f"the host key of tester@127.0.0.1:{server.port} has CHANGED since it was recorded in {known}: "
        "refusing to connect"
    )
    assert f"ssh-keygen -f {known} -R '[127.0.0.1]:{server.port}'" in str(error.hint)


def test_a_refused_key_says_how_to_install_one(tmp_path: Path) -> None:
    host_key, known = new_key(), tmp_path / "known_hosts"
    with ssh_server(host_key, authorized=new_key()) as server:
        known.write_text(known_hosts_line(server.port, host_key))
        config = ssh_config(
            tmp_path / "config",
            {"spark-1": server.port},
            UserKnownHostsFile=str(known),
            IdentityFile=str(write_key(new_key(), tmp_path / "not-authorized")),
        )
        error = failure(SshExecutor({"n1": "spark-1"}, str(config)), "n1")
    assert error.reason == f"tester@127.0.0.1:{server.port} refused every key offered (authentication failed)"
    assert error.hint == (
        f"`ssh -F {config} spark-1 true` must log in without a password: ssh-copy-id -p {server.port} "
        "tester@127.0.0.1, or name the key with IdentityFile in the ssh_config"
    )


def test_server_alive_interval_from_the_ssh_config_sends_keepalives(tmp_path: Path) -> None:
    host_key, client_key, known = new_key(), new_key(), tmp_path / "known_hosts"
    with ssh_server(host_key, client_key) as server:
        known.write_text(known_hosts_line(server.port, host_key))
        config = ssh_config(
            tmp_path / "config",
            {"spark-1": server.port},
            UserKnownHostsFile=str(known),
            IdentityFile=str(write_key(client_key, tmp_path / "key")),
            ServerAliveInterval="1",
        )
        executor = SshExecutor({"n1": "spark-1"}, str(config))
        try:
            executor.connection("n1")
            assert server.got.wait(20), "no keepalive came"
        finally:
            executor.close()
    assert "keepalive@lag.net" in server.global_requests


def test_every_unreachable_node_is_named_and_tried_once(tmp_path: Path) -> None:
    refused = closed_port()
    with listening() as silent:
        config = ssh_config(tmp_path / "config", {"a": silent.port, "b": refused}, ConnectTimeout="1")
        executor = SshExecutor({"n1": "a", "n2": "b"}, str(config))
        down = executor.reach(["n1", "n2"])
        again = failure(executor, "n1")
        assert silent.connections == 1  # the later call took the first answer: no second wait
    assert sorted(down) == ["n1", "n2"]
    assert "did not complete an SSH handshake within 1 s" in down["n1"].reason
    assert "connection refused" in down["n2"].reason
    assert again is down["n1"]


def test_callers_waiting_on_one_connection_share_its_failure(tmp_path: Path) -> None:
    with listening() as silent:
        config = ssh_config(tmp_path / "config", {"a": silent.port}, ConnectTimeout="1")
        executor = SshExecutor({"n1": "a"}, str(config))
        errors: list[NodeError] = []

        def call() -> None:
            try:
                executor.connection("n1")
            except NodeError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert silent.connections == 1 and len(errors) == 3


def test_a_missing_ssh_config_is_a_usage_error_not_an_unreachable_node(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        SshExecutor({"n1": "a"}, str(tmp_path / "nope"))
    assert caught.value.exit_status == ExitStatus.BAD_SPEC
    assert caught.value.message == f"ssh_config file {tmp_path / 'nope'} does not exist"
