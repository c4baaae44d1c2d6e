"""The real command line (`launcher.cli.main`, exit codes and all) run in this process, what it
writes captured: for tests that look at a command's output and status without a process of its own."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from unittest.mock import patch

from launcher.cli import main


@dataclass(frozen=True)
class Invoked:
    """What one command line did: its exit status, and stdout and stderr as written (interleaved)."""

    exit_code: int
    output: str


def invoke(args: Sequence[str], env: Mapping[str, str] | None = None) -> Invoked:
    """Run `spark-launch ARGS` here, with `env` set for it (restored after)."""
    written = io.StringIO()
    with patch.dict(os.environ, env or {}), redirect_stdout(written), redirect_stderr(written):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return Invoked(code, written.getvalue())
