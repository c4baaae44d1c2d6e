"""The start script, run here as a node runs it: the job comes on stdin (its secret values never
touch the node's disk), and the head's start keeps the run's receipt first."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.node_scripts import run_script

SECRET = "s3cr3t-value"
RUN_ID = "20260101-000000-abcd"


def job(tmp_path: Path, **more: object) -> str:
    return json.dumps(
        {
            "container": None,
            "cluster": "t",
            "node": "n1",
            "run_id": RUN_ID,
            "argv": ["sleep", "30"],
            "env": {"HF_TOKEN": SECRET},
            "digest": "d1",
            **more,
        }
    )


def test_the_job_on_stdin_starts_and_leaves_no_secret_on_disk(tmp_path: Path) -> None:
    receipt = ".spark-launch/t/runs/20260101-000000-abcd.json"
    keep = {"path": receipt, "text": '{"outcome": "starting"}\n'}
    done = run_script(tmp_path, "start", ".spark-launch/t/n1", stdin=job(tmp_path, keep=keep))
    answer = json.loads(done.stdout.splitlines()[-1])
    try:
        assert answer["ok"] is True and answer["state"]["run_id"] == RUN_ID
        run = tmp_path / ".spark-launch" / "t" / "n1"
        assert run.stat().st_mode & 0o777 == 0o700 and (run / "logs").stat().st_mode & 0o777 == 0o700
        files = [p for p in (tmp_path / ".spark-launch" / "t").rglob("*") if p.is_file()]
        assert files and not any(SECRET.encode() in p.read_bytes() for p in files)
        assert (tmp_path / receipt).read_text() == keep["text"]
        assert (tmp_path / receipt).stat().st_mode & 0o777 == 0o600
        environ = Path(f"/proc/{answer['state']['pid']}/environ").read_bytes()
        assert f"HF_TOKEN={SECRET}".encode() in environ  # delivered to the job itself
    finally:
        os.killpg(answer["state"]["pgid"], signal.SIGKILL)
        time.sleep(0.1)


def test_a_run_directory_that_cannot_be_made_is_the_answer_and_nothing_starts(tmp_path: Path) -> None:
    (tmp_path / ".spark-launch").mkdir()
    (tmp_path / ".spark-launch" / "t").write_text("a file where the cluster's folder goes")
    done = run_script(tmp_path, "start", ".spark-launch/t/n1", stdin=job(tmp_path))
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["ok"] is False
    assert answer["error"].startswith(f"cannot create the run directory {tmp_path}/.spark-launch/t/n1: ")


def test_no_job_on_stdin_is_the_answer(tmp_path: Path) -> None:
    done = run_script(tmp_path, "start", ".spark-launch/t/n1", stdin="")
    assert json.loads(done.stdout.splitlines()[-1]) == {"ok": False, "error": "no job on stdin"}
