"""How a sync runs and where it reports: shared by the sync and its copy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from launcher.core.sync.transfer_plan import CopyProgress


@dataclass(frozen=True, slots=True)
class SyncOptions:
    """How to sync: from which node, for real or not, directly or through this machine, how fast."""

    source: str | None = None
    dry_run: bool = False
    relay: bool = False
    bwlimit: float | None = None  # MB/s per target


class SyncReporter(Protocol):
    """Where sync tells the user what happens (the CLI prints; tests collect)."""

    def info(self, text: str) -> None:
        """A line of progress."""

    def progress(self, node: str, progress: CopyProgress) -> None:
        """A target's copy advanced."""
