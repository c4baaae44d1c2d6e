"""The real command line run in this process through click's CliRunner, for tests that look at a
command's output and exit status without a process of its own.

The result has `exit_code` (as the program exits: usage errors 2, a SparkLaunchError its own
status), `stdout` and `stderr` apart, and `output`, both as a terminal shows them. An exception
the command line does not map to an exit status is a bug: it is raised, not kept in the result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from click.testing import CliRunner, Result

from launcher.cli import cli


def invoke(args: Sequence[str], env: Mapping[str, str | None] | None = None) -> Result:
    """Run `spark-launch ARGS` here, with `env` set for it (restored after)."""
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
