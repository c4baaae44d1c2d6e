"""Where a plan's inputs came from when it was made for the nodes. Pure.

Its own module: `plan` plans offline and never needs it, and each dataclass defined costs a cold
start most of a millisecond.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.vllm.catalog import Catalog
from launcher.core.vllm.models import ModelFiles


@dataclass(frozen=True, slots=True)
class Sources:
    """Where a plan's inputs came from, when it was made for the nodes: `check` shows it, and
    holds every node's config.json to the one planned from."""

    model: ModelFiles
    catalog: Catalog
    learned: str | None = None  # how a catalog that is not committed was had; None: committed
    head_seconds: float | None = None  # the call asking the head, when one was needed
