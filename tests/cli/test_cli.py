"""The real CLI, driven in-process and as a subprocess: output, exit codes, no tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from launcher.cli.main import COMMANDS, Launcher, cli
from launcher.errors import ExitStatus, InputError, SparkLaunchError
from tests.conftest import ROOT, base_spec, edit, write
from tests.invoke import invoke

QWEN = str(ROOT / "configs" / "qwen3-next-2x-spark-v032.yaml")


def run_cli(*args: str) -> tuple[int, str, str]:
    """`spark-launch ARGS` through click's CliRunner: its exit status, stdout and stderr."""
    done = invoke(args)
    return done.exit_code, done.stdout, done.stderr


def test_plan_json_shape() -> None:
    code, out, _ = run_cli("plan", QWEN, "--json")
    assert code == 0
    whole = json.loads(out)
    assert set(whole) == {"cluster", "deployments"} and len(whole["deployments"]) == 1  # a list of one
    doc = whole["deployments"][0]
    assert doc["deployment"] == whole["cluster"] == "spark-pair"
    assert {"cluster", "vllm_version", "nodes", "derived"} <= set(doc)
    assert [n["name"] for n in doc["nodes"]] == ["spark-1", "spark-2"]
    for node in doc["nodes"]:
        assert {"name", "rank", "ssh", "argv", "env"} <= set(node)
        assert node["argv"][:2] == ["/opt/vllm/bin/vllm", "serve"]
    assert all({"setting", "value", "flag", "reason", "source"} <= set(d) for d in doc["derived"])


def test_plan_text_shows_commands_and_reasons() -> None:
    code, out, _ = run_cli("plan", QWEN)
    assert code == 0
    assert "== spark-2 (rank 1, headless) via ssh spark-2" in out
    assert "--mamba-cache-mode=align" in out
    assert "why: model with mamba layers (hybrid or attention-free): prefix caching on means 'align'" in out
    assert "HF_TOKEN=<secret from the launcher's environment>" in out


def test_validate_ok_and_bad(tmp_path: Path) -> None:
    assert run_cli("validate", QWEN)[0] == 0
    changes = {"serve.tensor_parallel_size": 5, "serve.nnodes": 2, "model.hybrid": True}
    bad = write(tmp_path, edit(base_spec(), **changes))
    code, out, err = run_cli("validate", str(bad))
    assert code == 2 and out == ""
    assert err.count(f"{bad}:") == 2


def test_missing_spec_file_is_a_clear_error() -> None:
    code, _, err = run_cli("plan", "/nonexistent/cluster.yaml")
    assert code == 2
    assert "cannot read spec /nonexistent/cluster.yaml" in err and "hint:" in err


def test_schema_is_json() -> None:
    code, out, _ = run_cli("schema")
    assert code == 0 and json.loads(out)["title"] == "spark-launch deployment spec"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(command: str) -> None:
    code, out, _ = run_cli(*command.split(), "--help")
    assert code == 0 and "Example" in out and f"spark-launch {command}" in out


def test_the_top_level_help_names_every_command() -> None:
    code, out, _ = run_cli("--help")
    assert code == 0
    prose = out.split("\nOptions:")[0]  # not click's own list of commands
    assert [c for c in COMMANDS if not re.search(rf"\b{c}\b", prose)] == []


def test_usage_error_exits_2() -> None:
    code, _, err = run_cli("plan")
    assert code == 2 and "Missing argument" in err


def test_what_a_command_returns_or_raises_is_the_exit_status() -> None:
    """The root group is the one place: a returned status, a SparkLaunchError's (its text on
    stderr, prefixed), Ctrl-C as 130; the program and click's CliRunner see the same."""
    group = Launcher("spark-launch", lazy_commands={})
    outcomes: dict[str, BaseException | ExitStatus | None] = {
        "returns": ExitStatus.NODES_DISAGREE,
        "nothing": None,
        "fails": SparkLaunchError("it broke", "try again"),
        "refuses": InputError("no such file"),
        "interrupted": KeyboardInterrupt(),
    }
    for name, outcome in outcomes.items():

        def run(outcome: BaseException | ExitStatus | None = outcome) -> ExitStatus | None:
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        group.command(name)(run)
    seen = {n: CliRunner().invoke(group, [n], catch_exceptions=False) for n in outcomes}
    assert {n: r.exit_code for n, r in seen.items()} == {
        "returns": 3,
        "nothing": 0,
        "fails": 1,
        "refuses": 2,
        "interrupted": 130,
    }
    assert seen["fails"].stderr == "spark-launch: it broke\n  hint: try again\n"
    assert seen["interrupted"].stderr == "interrupted\n" and seen["returns"].stdout == ""


def test_a_mistyped_command_is_told_the_nearest_of_the_lazily_loaded_ones() -> None:
    code, _, err = run_cli("valdate", "x.yaml")
    assert code == 2 and err.endswith("Error: No such command 'valdate'. Did you mean 'validate'?\n")
    code, _, err = run_cli()  # the group's help, as a usage error
    assert (
        code == 2 and err.startswith("Usage: spark-launch [OPTIONS] COMMAND [ARGS]...") and "Commands:" in err
    )


# All that planning one deployment offline may import of the launcher (`plan`, `validate`): each
# module more is start-up time (a record a tenth of a millisecond). The endpoint, the editor
# schema, the node side and the progress printer are imported where they are used.
PLAN_PATH = {
    "launcher",
    "launcher.cache",
    "launcher.catalogs",
    "launcher.errors",
    "launcher.load",
    "launcher.cli",
    "launcher.cli.candidates",
    "launcher.cli.shared",
    "launcher.cli.main",
    "launcher.cli.spec_commands",
    "launcher.core",
    "launcher.core.fleet_plan",
    "launcher.core.plan",
    "launcher.core.render",
    "launcher.core.rows",
    "launcher.core.terminal",
    "launcher.core.views",
    "launcher.core.vllm",
    "launcher.core.vllm.argv",
    "launcher.core.vllm.catalog",
    "launcher.core.vllm.models",
    "launcher.core.vllm.releases",
}
PLAN_PACKAGES = ("launcher.core.rules", "launcher.core.spec")  # the rules table and the spec: all of them


@pytest.mark.parametrize(
    "args",
    [
        ["plan", QWEN],
        ["plan", str(ROOT / "configs" / "demo.yaml"), "--json"],
        ["validate", str(ROOT / "configs" / "dense-2x-spark.yaml")],
    ],
    ids=["plan", "plan-json", "validate"],
)
def test_cold_plan_imports_only_the_planning_path(args: list[str]) -> None:
    probe = (
        "import json, sys, runpy; sys.argv=['spark-launch', *sys.argv[1:]];\n"
        "try:\n    runpy.run_module('launcher', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    print('MODULES', json.dumps(sorted(sys.modules)), file=sys.stderr); raise"
    )
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(done.stderr.rpartition("MODULES ")[2]))
    assert not {m for m in modules if m.split(".")[0] in ("fabric", "paramiko", "vllm", "torch", "invoke")}
    ours = {m for m in modules if m.split(".")[0] == "launcher"}
    assert sorted(ours - PLAN_PATH - {m for m in ours if m.startswith(PLAN_PACKAGES)}) == []
    assert "launcher.core.plan" in ours  # it planned
    assert "textwrap" not in modules  # piped output is never wrapped


def test_the_program_freezes_what_it_made_so_its_exit_skips_the_collector() -> None:
    """`spark-launch` (and `python -m launcher`) is `entry`: it ends with every object frozen,
    so the interpreter's exit does not examine them (a seventh of a plan's time), and exits as
    `main` does. `main` itself, as tests call it, freezes nothing."""
    probe = (
        "import gc, sys\n"
        "before = gc.get_freeze_count()  # not 0 on some builds: objects frozen at start-up\n"
        "from launcher.cli import entry, main\n"
        "sys.argv = ['spark-launch', '--version']\n"
        "for run in (main, entry):\n"
        "    try:\n"
        "        run()\n"
        "    except SystemExit as exc:\n"
        "        print(run.__name__, exc.code, gc.get_freeze_count() > before)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.splitlines()[1::2] == ["main 0 False", "entry 0 True"]
    assert 'spark-launch = "launcher.cli:entry"' in (ROOT / "pyproject.toml").read_text()
    assert "entry()" in (ROOT / "launcher" / "__main__.py").read_text()


def test_a_bad_spec_prints_no_traceback(tmp_path: Path) -> None:
    bad = write(tmp_path, {"name": "x", "nodes": "oops"})
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "plan", str(bad)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr and "nodes: expected a list" in done.stderr


def _command_paths(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        found += (
            _command_paths(command, (*path, name)) if isinstance(command, click.Group) else [(*path, name)]
        )
    return found


@pytest.mark.parametrize("columns", [80, 120])
def test_every_help_fits_the_terminal(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """click wraps prose to the terminal; the examples and tables are written to fit 80 columns."""
    monkeypatch.setenv("COLUMNS", str(columns))
    too_wide = {}
    for path in _command_paths(cli):
        done = invoke([*path, "--help"])
        assert done.exit_code == 0, path
        wide = [line for line in done.output.splitlines() if len(line) > columns]
        if wide:
            too_wide[" ".join(path) or "spark-launch"] = wide
    assert not too_wide, too_wide
