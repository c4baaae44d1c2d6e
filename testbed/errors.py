"""The test bed's one error type and its exit codes."""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    """Exit codes of `python -m testbed`; `cli.main` is the only place that maps to them."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    NOT_UP = 3
    INTERRUPTED = 130


class TestbedError(Exception):
    """A failure the user can act on: what went wrong plus a hint."""

    __test__ = False  # its name starts with "Test": keep pytest from collecting it

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        """The text shown to the user."""
        return f"testbed: {self.message}" + (f"\n  hint: {self.hint}" if self.hint else "")
