"""The real command line (`launcher.cli.main`, exit codes and all) run in this process, what it
writes captured: for tests that look at a command's output and status without a process of its own."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from launcher.cli import main


@dataclass(frozen=True)
class Invoked:
    """What one command line did: its exit status, and stdout and stderr as written (interleaved)."""

    exit_code: int
    output: str


def invoke(args: Sequence[str], env: Mapping[str, str] | None = None) -> Invoked:
    """Run `spark-launch ARGS` here, with `env` set for it (restored after)."""
    before = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    written = io.StringIO()
    try:
        with redirect_stdout(written), redirect_stderr(written):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return Invoked(code, written.getvalue())
