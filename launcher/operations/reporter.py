"""Where operations tell the user what is happening: the CLI prints, tests and scripts stay quiet."""

from __future__ import annotations

from typing import Protocol


class Reporter(Protocol):
    """Where operations tell the user what is happening (the CLI prints; tests collect)."""

    def info(self, text: str) -> None:
        """A line of progress."""

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Each node's current start-up stage."""


class Silent:
    """A Reporter that says nothing (for scripts and tests)."""

    def info(self, text: str) -> None:
        """Ignore."""

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Ignore."""
