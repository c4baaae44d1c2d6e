"""The spec judged before any connection, through the real command line: a misspelt key, a secret
not set here, a YAML slip are reported by every command that takes a spec, cause before
consequence, and no node is asked (a port that accepts and never answers sees no connection);
Ctrl-C ends a command waiting on such a port at once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_spec, edit, write
from tests.invoke import invoke
from tests.ssh_servers import Listener, closed_port, listening, ssh_config


@pytest.fixture
def silent(tmp_path: Path) -> Iterator[tuple[Listener, Path]]:
    """Two nodes on one port that accepts TCP and never speaks SSH; each connection would wait 30 s."""
    with listening() as port:
        config = ssh_config(tmp_path / "ssh_config", {"a": port.port, "b": port.port}, ConnectTimeout="30")
        yield port, config


def spec_with(tmp_path: Path, config: Path, **changes: object) -> Path:
    data = edit(base_spec(), **{"model.hybrid": True, "ssh_config": str(config), **changes})
    data["nodes"][0]["ssh"], data["nodes"][1]["ssh"] = "a", "b"
    return write(tmp_path, data)


def line_of(spec: Path, text: str) -> int:
    return next(i for i, line in enumerate(spec.read_text().splitlines(), 1) if text in line)


def misspelt(tmp_path: Path, config: Path) -> Path:
    """tensor_parallel_size misspelt: its default (1) then does not fit the two nodes' GPUs."""
    spec = spec_with(tmp_path, config, **{"serve.tensor_parallel_size": None, "serve.tensor_paralel_size": 2})
    return spec


@pytest.mark.parametrize("command", [["up"], ["check"], ["up", "--dry-run"], ["verify"], ["sync", "models"]])
def test_a_misspelt_key_is_reported_before_any_connection(
    tmp_path: Path, silent: tuple[Listener, Path], command: list[str]
) -> None:
    port, config = silent
    spec = misspelt(tmp_path, config)
    done = invoke([*command, str(spec)])
    assert done.exit_code == 2 and done.stdout == ""
    typo, knock_on = line_of(spec, "tensor_paralel_size"), line_of(spec, "serve:")
    assert done.stderr.splitlines()[:4] == [
        f"{spec}:{typo}: serve.tensor_paralel_size: is not a `vllm serve` option in vLLM 0.32.0",
        "    hint: did you mean 'tensor_parallel_size'?",
        f"{spec}:{knock_on}: serve.tensor_parallel_size: tensor x pipeline x data parallel = 1, but the "
        "2 node(s) have 2 GPU(s)",
        "    hint: e.g. tensor_parallel_size: 2",
    ]
    assert "connecting" not in done.stderr and port.connections == 0


def test_status_says_the_spec_does_not_plan_first_then_asks_the_nodes(tmp_path: Path) -> None:
    config = ssh_config(tmp_path / "ssh_config", {"a": closed_port(), "b": closed_port()})
    spec = misspelt(tmp_path, config)
    done = invoke(["status", str(spec)])
    assert done.exit_code == 4
    lines = done.stderr.splitlines()
    assert lines[0] == (
        f"warning: {spec}:{line_of(spec, 'tensor_paralel_size')}: serve.tensor_paralel_size: is not a "
        "`vllm serve` option in vLLM 0.32.0"
    )
    said = next(i for i, line in enumerate(lines) if "the spec does not plan" in line)
    assert said < next(i for i, line in enumerate(lines) if line.startswith("connecting to"))


@pytest.mark.parametrize("command", [["up"], ["up", "--dry-run"], ["supervise"]])
def test_a_secret_not_set_here_is_located_at_its_name(
    tmp_path: Path, silent: tuple[Listener, Path], command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    port, config = silent
    spec = spec_with(tmp_path, config, secrets=["HF_TOKEN"])
    done = invoke([*command, str(spec)])
    assert done.exit_code == 2 and port.connections == 0
    assert done.stderr.splitlines() == [
        f"{spec}:{line_of(spec, '- HF_TOKEN')}: secrets[0]: HF_TOKEN is not set in this environment",
        "    hint: export HF_TOKEN=... where you run spark-launch (its value never reaches argv, logs "
        "or the plan)",
    ]


def test_check_needs_no_secret_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    config = ssh_config(tmp_path / "ssh_config", {"a": closed_port(), "b": closed_port()})
    done = invoke(["check", str(spec_with(tmp_path, config, secrets=["HF_TOKEN"]))])
    assert done.exit_code == 4 and "HF_TOKEN" not in done.stderr


SLIPS = [
    (
        "serve:\n\ttensor_parallel_size: 2\n",
        2,
        "not valid YAML at column 1: a tab",
        "YAML indents with spaces",
    ),
    ('name: "t\nserve: {}\n', 1, "not valid YAML at column 7: a quote opened here is never closed", "close"),
    ("name: t\nserve\n  port: 1\n", 2, "not valid YAML at column 1: a key without ':'", "write `key: value`"),
    ("name: t\nserve:\n    port: 1\n  seed: 2\n", 4, "at column 3: this line is not aligned", "indent"),
]


@pytest.mark.parametrize(("text", "line", "message", "hint"), SLIPS, ids=["tab", "quote", "colon", "indent"])
@pytest.mark.parametrize("command", ["validate", "up", "status"])
def test_yaml_slips_are_named_with_line_column_and_hint(
    tmp_path: Path, command: str, text: str, line: int, message: str, hint: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    done = invoke([command, str(spec)])
    assert done.exit_code == 2
    first, second = done.stderr.splitlines()
    assert first.startswith(f"{spec}:{line}: (top level): ") and message in first
    assert second.startswith(f"    hint: {hint}")


@pytest.mark.parametrize(
    "command",
    [["up"], ["status"], ["check"], ["down"], ["init", "--hosts", "a,b"]],
    ids=lambda c: c[0],
)
def test_ctrl_c_ends_a_command_waiting_on_a_connection_at_once(
    tmp_path: Path, silent: tuple[Listener, Path], command: list[str]
) -> None:
    port, config = silent
    spec = [str(spec_with(tmp_path, config))] if command[0] != "init" else ["--ssh-config", str(config)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", *command, *spec],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("connecting to 2 "), first
        waited = time.monotonic() + 10
        while port.connections < 2 and time.monotonic() < waited:  # both handshakes now wait (30 s)
            time.sleep(0.02)
        assert port.connections == 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)  # well before the 30 s of the connect timeout
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted"
