"""The commands on nodes that cannot be reached, against real local ports: a "connecting to N
nodes" line first, every unreachable node named (not only the first), exit 4 everywhere."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import base_spec, edit, write
from tests.invoke import invoke
from tests.ssh_servers import closed_port, listening, ssh_config


@pytest.fixture
def spec(tmp_path: Path) -> Iterator[Path]:
    """A two-node spec: n1 accepts TCP and never speaks SSH, n2's port is closed."""
    with listening() as silent:
        config = ssh_config(
            tmp_path / "ssh_config", {"a": silent.port, "b": closed_port()}, ConnectTimeout="1"
        )
        data = edit(base_spec(), **{"model.hybrid": True, "ssh_config": str(config)})
        data["nodes"][0]["ssh"], data["nodes"][1]["ssh"] = "a", "b"
        yield write(tmp_path, data)


def run_cli(*args: str) -> tuple[int, str, str]:
    """`spark-launch ARGS` through click's CliRunner: its exit status, stdout and stderr."""
    done = invoke(args)
    return done.exit_code, done.stdout, done.stderr


def test_up_names_every_unreachable_node_and_starts_nothing(spec: Path) -> None:
    code, _, err = run_cli("up", str(spec))
    assert code == 4
    assert (
        f"connecting to 2 node(s) through {spec.parent / 'ssh_config'} (each within its ConnectTimeout" in err
    )
    assert "spark-launch: cannot reach 2 of 2 node(s) (n1, n2): nothing was started" in err
    assert "  n1: tester@127.0.0.1:" in err and "did not complete an SSH handshake within 1 s" in err
    assert "  n2: connection refused by tester@127.0.0.1:" in err
    assert "node n1: node n1" not in err and "No existing session" not in err


def test_check_names_every_unreachable_node_in_its_table(spec: Path) -> None:
    code, out, _ = run_cli("check", str(spec), "--json")
    assert code == 4
    ssh = json.loads(out)["rows"][0]
    assert ssh["area"] == "ssh" and not ssh["ok"]
    assert "within 1 s" in ssh["values"]["n1"] and "connection refused" in ssh["values"]["n2"]
    assert (
        ssh["hint"].startswith("n1: is sshd listening on that port")
        and "\nn2: is sshd running" in ssh["hint"]
    )


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["verify"], ["down"], ["logs"]])
def test_every_command_exits_4_on_an_unreachable_node(spec: Path, command: list[str]) -> None:
    code, _, err = run_cli(command[0], str(spec), *command[1:])
    assert code == 4, err
    assert "n2: connection refused by tester@127.0.0.1:" in err and "hint: is sshd running there" in err


def test_down_json_says_what_was_not_reached(spec: Path) -> None:
    code, out, _ = run_cli("down", str(spec), "--json")
    doc = json.loads(out)
    (one,) = doc["deployments"]
    assert code == 4 and doc["clean"] is False and sorted(one["unreachable"]) == ["n1", "n2"]


def test_connect_timeout_option_bounds_each_connection(spec: Path) -> None:
    code, _, err = run_cli("up", str(spec), "--connect-timeout", "0.3")
    assert code == 4 and "within 0.3 s" in err and "(each within 0.3 s)" in err


def test_verbose_says_how_each_node_is_reached(spec: Path) -> None:
    code, _, err = run_cli("-v", "up", str(spec))
    assert code == 4
    config = spec.parent / "ssh_config"
    assert "ssh: n2: tester@127.0.0.1:" in err and f"through {config}, timeout 1 s, known_hosts" in err


@pytest.mark.parametrize("command", ["check", "up", "status", "down", "logs", "verify"])
def test_a_missing_ssh_config_file_is_a_spec_problem_at_its_key(tmp_path: Path, command: str) -> None:
    data = edit(base_spec(), **{"model.hybrid": True, "ssh_config": str(tmp_path / "nope")})
    spec = write(tmp_path, data)
    line = next(i for i, text in enumerate(spec.read_text().splitlines(), 1) if text.startswith("ssh_config"))
    code, out, err = run_cli(command, str(spec))
    assert code == 2 and out == ""
    assert err.startswith(
        f"{spec}:{line}: ssh_config: the file {tmp_path / 'nope'} does not exist\n    hint: "
    )
    assert "node (all)" not in err and "connecting" not in err


def test_a_missing_ssh_config_option_file_is_a_usage_error(spec: Path, tmp_path: Path) -> None:
    code, _, err = run_cli("check", str(spec), "--ssh-config", str(tmp_path / "nope"))
    assert code == 2 and f"spark-launch: ssh_config file {tmp_path / 'nope'} does not exist" in err


def test_sync_images_on_a_venv_spec_is_exit_2(spec: Path) -> None:
    code, _, err = run_cli("sync", "images", str(spec))
    assert code == 2 and "sync images is for the docker runtime" in err


def test_diagnose_json_names_the_bundle_and_the_nodes_it_could_not_ask_and_exits_4(
    spec: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "b.tar.gz"
    code, out, _ = run_cli("diagnose", str(spec), "-o", str(bundle), "--json")
    doc = json.loads(out)
    assert code == 4 and doc["bundle"] == str(bundle) and bundle.stat().st_size == doc["bytes"]
    assert doc["nodes_failed"] == ["n1", "n2"] and "plan.json" in doc["files"]


def test_connect_timeout_may_be_set_once_in_the_environment(
    spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LAUNCH_CONNECT_TIMEOUT", "0.3")
    code, _, err = run_cli("down", str(spec))
    assert code == 4 and "(each within 0.3 s)" in err
    code, _, err = run_cli("down", str(spec), "--connect-timeout", "0.4")  # the option wins
    assert code == 4 and "(each within 0.4 s)" in err
    monkeypatch.setenv("SPARK_LAUNCH_CONNECT_TIMEOUT", "0")
    code, _, err = run_cli("down", str(spec))
    assert code == 2
    assert "Invalid value for '--connect-timeout' (env var: 'SPARK_LAUNCH_CONNECT_TIMEOUT'): 0.0" in err


EVERY_COMMAND = [
    ["up"],
    ["check"],
    ["status"],
    ["down"],
    ["logs"],
    ["verify"],
    ["lock"],
    ["sync", "models"],
    ["supervise", "--max-restarts", "0", "--events", "events.jsonl"],
    ["diagnose", "-o", "bundle.tar.gz"],
    ["init", "--hosts", "a,b", "--model", "/m", "--venv", "/v"],
    ["facts", "--hosts", "a,b"],
]


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=lambda c: " ".join(c[:2]))
def test_every_command_names_each_unreachable_node_once_with_its_ssh_line(
    spec: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(spec.parent)
    config = spec.parent / "ssh_config"
    by_host = "--hosts" in command
    args = [*command, "--ssh-config", str(config)] if by_host else [command[0], str(spec), *command[1:]]
    if command[0] == "sync":
        args = ["sync", "models", str(spec)]
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    done = invoke(args)
    assert (
        signal.getsignal(signal.SIGINT),
        signal.getsignal(signal.SIGTERM),
    ) == handlers  # supervise's are gone
    said = done.stdout + done.stderr
    assert done.exit_code == 4, said
    silent, refused = ("n1", "n2") if not by_host else ("a", "b")
    reasons = {
        silent: "did not complete an SSH handshake within 1 s",
        refused: "connection refused by tester@127.0.0.1:",
    }
    lines = {silent: f"`ssh -F {config} -v a true`", refused: f"`ssh -F {config} b true`"}
    for node in (silent, refused):
        assert said.count(reasons[node]) == 1, f"{node}'s reason, once:\n{said}"
        assert said.count(lines[node]) == 1, f"{node}'s ssh line, once:\n{said}"
    assert "cannot reach 2 of 2 node(s) (" in done.stderr
    assert "asking" not in said and "~/.ssh/config" not in said


def test_down_names_each_node_once_and_no_others_when_none_was_stopped(spec: Path) -> None:
    code, out, err = run_cli("down", str(spec))
    assert code == 4 and out == ""
    assert err.count("n1") == err.count("n2") == 2  # the verdict's list, then its reason and fix
    assert "spark-launch: cannot reach 2 of 2 node(s) (n1, n2): nothing was stopped" in err
    assert "others" not in err
