"""Rows of the host: GPUs and memory as reported (informational; warns). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.checks.report import Row


def host_rows(facts: Mapping[str, dict[str, Any]], nnodes: int) -> list[Row]:
    """GPUs and memory as reported (informational, warns when the model cannot fit)."""
    host = {n: f.get("host", {}) for n, f in facts.items()}
    rows = [
        Row(
            "host",
            "gpus (nvidia-smi)",
            {n: h.get("gpus") or "none reported" for n, h in host.items()},
            True,
            level="warn",
        )
    ]
    need = {n: f.get("model", {}).get("weight_bytes", 0) / max(1, nnodes) for n, f in facts.items()}
    fits = {n: host[n].get("MemAvailable", 0) >= need[n] for n in host}
    rows.append(
        Row(
            "host",
            "memory available vs weights per node",
            {
                n: f"{host[n].get('MemAvailable', 0) / 2**30:.1f} GiB free, weights/node "
                f"{need[n] / 2**30:.1f} GiB"
                for n in host
            },
            all(fits.values()),
            None
            if all(fits.values())
            else "free memory is below the weights' share: the start will likely fail",
            "warn",
        )
    )
    return rows
