"""`init` and `facts` as operations and as commands, the nodes answered by a scripted FAKE
executor (the real nodes are in tests/e2e/test_init.py): how the links are tried, a host
that cannot be asked, and the command line's refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launcher.cli import main
from launcher.commands.init import init
from launcher.core.init.draft import InitRequest
from launcher.errors import ExitStatus
from launcher.node.executor import NodeError, Result
from launcher.node.ssh import SshExecutor
from launcher.operations.gathering.discovering import HostsUnreachable
from launcher.operations.reporter import Silent
from tests.fakes.executor import ScriptedExecutor
from tests.init_facts import bed_pair

REQUEST = InitRequest(("node1", "node2"), "bed", "/models/m", "/opt/vllm")


def scripted(
    connect: dict[str, Any] | Exception | None = None, peers: list[str] | None = None
) -> ScriptedExecutor:
    """Both nodes answer discover with bed facts; the head listens; node2 connects as told."""
    facts = bed_pair()

    def net(words: list[str]) -> dict[str, Any] | Result | Exception:
        if words[4] == "listen":
            lines = [{"listening": True, "port": 40123}, {"ok": True, "peers": peers or ["10.99.0.2"]}]
            return Result(" ".join(words), 0, "".join(json.dumps(x) + "\n" for x in lines), "")
        assert words[5:7] == ["10.99.0.1", "40123"]  # the head's address, the port it listens on
        return connect if connect is not None else {"ok": True}

    return ScriptedExecutor(
        {
            ("node1", "discover"): lambda _: facts["node1"],
            ("node2", "discover"): lambda _: facts["node2"],
            ("*", "net"): net,
        }
    )


def test_a_link_every_worker_reaches_is_written() -> None:
    executor = scripted()
    result = init(executor, REQUEST, "bed.yaml", Silent())
    assert result.spec.ready, result.spec.problems
    assert result.choice.chosen is not None and result.choice.chosen.head.address == "10.99.0.1"
    assert executor.keys("node1") == ["discover", "net"] and executor.keys("node2") == ["discover", "net"]


@pytest.mark.parametrize(
    ("connect", "peers", "said"),
    [
        ({"ok": False, "error": "No route to host"}, None, "node2: No route to host"),
        (NodeError("node2", "connection lost"), None, "node2: connection lost"),
        ({"ok": True}, ["10.99.0.77"], "node1 saw no connection from 10.99.0.2"),
    ],
)
def test_a_link_that_does_not_really_connect_is_not_chosen(
    connect: dict[str, Any] | Exception, peers: list[str] | None, said: str
) -> None:
    result = init(scripted(connect, peers), REQUEST, "bed.yaml", Silent())
    assert result.choice.chosen is None and not result.spec.ready
    assert any(said in line for line in result.choice.others) and "<CHOOSE>" in result.spec.text


def test_a_host_that_cannot_be_asked_stops_init() -> None:
    executor = scripted()
    executor.handlers[("node2", "discover")] = lambda _: NodeError(
        "node2", "timed out reaching root@10.99.0.9:22", "is it up?"
    )
    with pytest.raises(HostsUnreachable) as caught:
        init(executor, REQUEST, "bed.yaml", Silent())
    assert caught.value.exit_status == ExitStatus.UNREACHABLE
    assert "no spec was written" in caught.value.message
    assert "node node2: timed out reaching root@10.99.0.9:22" in caught.value.render()
    assert "net" not in executor.keys("node1")  # nothing tried once a host is missing


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--hosts", "a,b", "--venv", "opt/vllm"], "must be an absolute path"),
        (["--hosts", "a,b", "--venv", "/v", "--image", "i"], "give --venv or --image, not both"),
        (["--hosts", "a,,a"], "a is given twice"),
        (["--hosts", " , "], "give at least one host"),
        (["--hosts", "-oProxyCommand=x"], "is not an ssh target"),
        (["--hosts", "spark-1,spark-2;id"], "'spark-2;id' is not an ssh target"),
        (["--hosts", "`id`@spark-1"], "is not an ssh target"),
    ],
)
def test_bad_arguments_are_usage_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    code, _, err = run_cli(capsys, "init", *args)
    assert code == 2 and said in err


def test_an_existing_spec_is_not_replaced_without_force(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "cluster.yaml"
    target.write_text("mine\n")
    code, _, err = run_cli(capsys, "init", "--hosts", "a,b", "-o", str(target))
    assert code == 1 and "exists: not replaced" in err and "--force" in err
    assert target.read_text() == "mine\n"


def test_a_missing_ssh_config_is_said_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "facts", "--hosts", "a", "--ssh-config", "/nonexistent/ssh_config")
    assert code == 2 and "ssh_config file /nonexistent/ssh_config does not exist" in err
    assert "node (all)" not in err


@pytest.mark.parametrize("target", ["spark-1;id", "spark-1 -oProxyCommand=id", "$(id)", "a|b", "-oX"])
def test_the_executor_refuses_a_target_with_shell_metacharacters(target: str) -> None:
    """Whatever reaches it (a spec, --hosts, a script): refused before any connection."""
    with pytest.raises(NodeError) as caught:
        SshExecutor({"n1": target})
    assert caught.value.node == "n1" and "is not an ssh target" in caught.value.message
