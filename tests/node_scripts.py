"""Running a node script here as a node runs it (`python3 -S -`, the bundle on its stdin)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from launcher.node.scripts import bundle

HANG = 60  # seconds: a walk that reads a FIFO or /dev/zero never ends; this ends the test instead


def prepare(tmp_path: Path, path: Path, remove: list[str]) -> dict[str, Any]:
    """The prepare script's answer for model `path` with `remove` listed (its job file taken)."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"path": str(path), "remove": remove}))
    done = subprocess.run(
        ["python3", "-S", "-", "prepare", str(tmp_path), str(job)],
        input=bundle("prepare"),
        capture_output=True,
        text=True,
        timeout=HANG,
        check=True,
    )
    assert not job.exists()  # the job file is taken
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return answer
