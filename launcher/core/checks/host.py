"""Rows of the host: the GPUs as reported (informational; warns). Memory: `checks.memory`. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.checks.report import Row


def host_rows(facts: Mapping[str, Mapping[str, Any]], nnodes: int) -> list[Row]:
    """The GPUs as nvidia-smi reports them (informational)."""
    host = {n: f.get("host", {}) for n, f in facts.items()}
    return [
        Row(
            "host",
            "gpus (nvidia-smi)",
            {n: h.get("gpus") or "none reported" for n, h in host.items()},
            True,
            level="warn",
        )
    ]
