"""--json where scripts need it, --version, completion: the real CLI, no node needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, base_spec, edit, write
from tests.invoke import invoke

DEMO = str(ROOT / "configs" / "demo.yaml")


def run_cli(*args: str) -> tuple[int, str, str]:
    """`spark-launch ARGS` through click's CliRunner: its exit status, stdout and stderr."""
    done = invoke(args)
    return done.exit_code, done.stdout, done.stderr


def test_validate_json_lists_every_problem_with_its_line_and_hint(tmp_path: Path) -> None:
    bad = write(tmp_path, edit(base_spec(), **{"model.hybrid": True, "serve.gpu_memory_utilization": 85}))
    code, out, err = run_cli("validate", str(bad), "--json")
    doc = json.loads(out)
    assert code == 2 and err == "" and doc["ok"] is False
    assert doc["problems"] == [
        {
            "line": 22,
            "path": "serve.gpu_memory_utilization",
            "message": "85 is outside (0, 1]",
            "hint": "a fraction of the GPU's memory, not a percentage: 0.85 for 85%",
        }
    ]


def test_validate_json_of_a_good_spec() -> None:
    code, out, _ = run_cli("validate", DEMO, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and doc["problems"] == []
    assert [(d["deployment"], d["nodes"]) for d in doc["deployments"]] == [("demo", 2)]


def test_validate_json_of_a_missing_file_is_exit_2() -> None:
    code, out, _ = run_cli("validate", "/nonexistent.yaml", "--json")
    assert code == 2 and json.loads(out)["problems"][0]["message"].startswith("cannot read spec")


def test_up_dry_run_json_is_json() -> None:
    code, out, _ = run_cli("up", DEMO, "--dry-run", "--json")
    (doc,) = json.loads(out)["deployments"]  # a list of one, as with several
    assert code == 0 and doc["run"] is False and [n["name"] for n in doc["nodes"]] == ["node1", "node2"]
    head = doc["nodes"][0]
    assert head["argv"][-1] != "--headless" and [c["script"] for c in head["calls"]] == ["start"]
    job = next(c["stdin"] for c in head["calls"] if isinstance(c["stdin"], dict))
    assert job["argv"] == head["argv"]


def test_version_lists_the_supported_vllm_releases() -> None:
    code, out, _ = run_cli("--version")
    assert code == 0 and out == "spark-launch 0.1.0; vLLM releases supported: 0.32.0, 0.33.0, 0.34.0\n"


def test_shell_completion_works_as_documented() -> None:
    env = {
        **os.environ,
        "_SPARK_LAUNCH_COMPLETE": "bash_complete",
        "COMP_WORDS": "spark-launch va",
        "COMP_CWORD": "1",
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "spark-launch")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.strip() == "plain,validate"
    help_text = subprocess.run(
        [sys.executable, "-m", "launcher", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert 'eval "$(_SPARK_LAUNCH_COMPLETE=bash_source spark-launch)"' in help_text
