"""The command line: the only package importing click. Each command returns an ExitStatus."""

from launcher.cli.main import cli, main

__all__ = ["cli", "main"]
