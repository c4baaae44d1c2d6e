"""The command line (its own layer: `commandline`). Each command returns an ExitStatus."""

from launcher.cli.main import cli, entry, main

__all__ = ["cli", "entry", "main"]
