"""The command line: the only package importing click. Each command returns an ExitStatus."""

from launcher.cli.main import cli, entry, main

__all__ = ["cli", "entry", "main"]
