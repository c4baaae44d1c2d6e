"""Secrets: refused under env: (by name or by shape, never echoed), taken out of what leaves the
machine, and on no command line the launcher builds or starts, on any node."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import pytest

from launcher.cli.main import main
from launcher.core import remote
from launcher.core.redact import redact
from launcher.core.render import run_dir
from launcher.core.spec.secrets import TOKEN_SHAPES, secret_name, token_kind
from launcher.node.executor import Result
from launcher.node.scripts import inputs
from launcher.operations.reporter import Silent
from launcher.operations.running.starting import UpOptions, up
from launcher.operations.running.stopping import down
from tests.conftest import base_spec, edit, fake_vllm_cluster, plan_of, spec_of, write
from tests.fakes.local import LocalExecutor

HF = "hf_" + "Ab3" * 12  # shaped like a Hugging Face token
BASE = edit(base_spec(), **{"model.hybrid": True})

# (env as written, where, the message pinned)
REFUSED = [
    ({"env": {"HF_TOKEN": "x" * 8}}, "env.HF_TOKEN", "HF_TOKEN looks like a secret (by its name)"),
    ({"env": {"OPENAI_KEY": "x" * 8}}, "env.OPENAI_KEY", "OPENAI_KEY looks like a secret (by its name)"),
    ({"env": {"my_secret": "x" * 8}}, "env.my_secret", "my_secret looks like a secret (by its name)"),
    ({"env": {"DB_PASSWORD_FILE": "x" * 8}}, "env.DB_PASSWORD_FILE", "DB_PASSWORD_FILE looks like a secret"),
    ({"nodes.1.env": {"WANDB_API_KEY": "x" * 8}}, "nodes[1].env.WANDB_API_KEY", "WANDB_API_KEY looks like"),
    ({"env": {"HF_HOME_X": HF}}, "env.HF_HOME_X", "the value of HF_HOME_X looks like a Hugging Face token"),
    ({"env": {"NOTE": "Bearer " + HF}}, "env.NOTE", "the value of NOTE looks like a Hugging Face token"),
    ({"env": {"X": "nvapi-" + "a1" * 15}}, "env.X", "the value of X looks like an NVIDIA NGC key"),
]


@pytest.mark.parametrize(("changes", "where", "message"), REFUSED, ids=[w for _, w, _ in REFUSED])
def test_a_secret_under_env_is_refused_by_validate_naming_it_never_its_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], where: str, message: str
) -> None:
    spec = write(tmp_path, edit(BASE, **changes))
    with pytest.raises(SystemExit) as exited:
        main(["validate", str(spec)])
    out = capsys.readouterr()
    assert exited.value.code == 2
    assert f": {where}: {message}" in out.err
    assert "hint: list its name under secrets: and export it where you run spark-launch" in out.err
    value = next(iter(next(iter(changes.values())).values()))
    assert value not in out.err + out.out


def test_names_and_values_that_hold_no_secret_pass() -> None:
    assert not secret_name("NCCL_IB_PKEY") and not secret_name("VLLM_MAX_TOKENS_PER_X")
    assert not secret_name("HF_HUB_OFFLINE") and token_kind("hf_transfer") is None
    assert secret_name("VLLM_API_KEY") and secret_name("db_password") and secret_name("AWS_SECRET")


def test_the_node_scripts_hash_the_same_token_shapes_as_the_core() -> None:
    assert tuple(shape for _, shape in TOKEN_SHAPES) == inputs.TOKEN_SHAPES
    shown = inputs.engine_env({"HF_X": HF, "VLLM_OPENAI_KEY": "plain", "VLLM_PORT": "1"})
    assert shown["HF_X"].startswith("sha256:") and shown["VLLM_OPENAI_KEY"].startswith("sha256:")
    assert shown["VLLM_PORT"] == "1"


def test_redaction_covers_every_secret_name_and_token_shape() -> None:
    text = f"OPENAI_KEY=abc123 my_password: hunter2 token {HF} NCCL_IB_PKEY=0 max_num_batched_tokens=8"
    out = redact(text, [])
    assert "abc123" not in out and "hunter2" not in out and HF not in out
    assert "NCCL_IB_PKEY=0" in out and "max_num_batched_tokens=8" in out


class Recording(LocalExecutor):
    """Runs as LocalExecutor does, keeping every command line it is given."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.commands: list[str] = []

    def run(self, node: str, command: str, stdin: str | None = None, timeout: float | None = None) -> Result:
        self.commands.append(command)
        return super().run(node, command, stdin, timeout)

    def stream(self, node: str, command: str, *args: Any, **kwargs: Any) -> Result:
        self.commands.append(command)
        return super().stream(node, command, *args, **kwargs)

    def open(self, node: str, command: str) -> Any:
        self.commands.append(command)
        return super().open(node, command)


def every_argv() -> list[list[str]]:
    """The command line of every process on this machine."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0"))
        except OSError:
            continue
    return out


def test_no_secret_value_reaches_any_argv_of_a_real_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up` through the real node scripts (start wrapper included) with a FAKE vLLM: while it
    runs, no process on this machine has a secret's value on its command line, and no command
    the launcher sent carried one."""
    values = {"HF_TOKEN": "hf_" + secrets.token_hex(20), "SERVICE_PASSWORD": secrets.token_hex(12)}
    executor = Recording(tmp_path / "home")
    cluster = fake_vllm_cluster(tmp_path, monkeypatch, executor, secrets=list(values))
    try:
        up(cluster, values, UpOptions(timeout=60, check=False, grace=2), Silent())
        running = every_argv()
    finally:
        down(cluster, 2, Silent())
    seen = [" ".join(a) for a in running if any(v in w for v in values.values() for w in a)]
    assert not seen
    assert executor.commands and not [c for c in executor.commands if any(v in c for v in values.values())]


@pytest.mark.parametrize("runtime", ["venv", "docker"])
def test_no_command_the_launcher_builds_carries_a_secret_or_an_env_value(runtime: str) -> None:
    """Every Call of core.remote for a spec with secrets and env values: the values travel on
    stdin (job files, the probe's env line), never in a command line or the argv started."""
    data = edit(BASE, env={"NCCL_DEBUG": "WARN", "ODD_VALUE": "v-" + secrets.token_hex(6)})
    data["secrets"] = ["HF_TOKEN", "SERVICE_PASSWORD"]
    if runtime == "docker":
        data["vllm"] = {"version": "0.32.0", "runtime": "docker", "image": "img:1"}
    spec, plan = spec_of(data), plan_of(data)
    values = {"HF_TOKEN": "hf_" + secrets.token_hex(20), "SERVICE_PASSWORD": secrets.token_hex(12)}
    hidden = [*values.values(), data["env"]["ODD_VALUE"]]
    for node in plan.nodes:
        where = run_dir(plan.cluster, node.name)
        job = remote.node_job(spec, plan, node, "rid", values)
        calls = [
            remote.start_call(where, job),
            remote.probe_call(spec, node, "tag"),
            remote.probe_call(spec, node, "tag", fresh=True),
            remote.status_call(where, 0),
            remote.stop_call(where, 5, runtime == "docker"),
            remote.gather_call(where, {"lines": 5, "secrets": list(values)}),
            remote.stacks_call(where, {"lines": 5}),
            remote.facts_call(where, {"model": spec.model.path}),
            *remote.dry_run_calls(spec, plan, "u" * 64)[node.name],
        ]
        for call in calls:
            assert not [v for v in hidden if v in call.command], call.command
        assert not [w for w in job["argv"] if any(v in w for v in hidden)]
        assert "\n" not in (remote.probe_call(spec, node, "tag").data or "\n")[:-1]  # one line
