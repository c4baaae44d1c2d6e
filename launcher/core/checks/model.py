"""Rows of the model: present everywhere, config and tokenizer identical, weights the same. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from launcher.core.checks.report import Row, each, same, short
from launcher.core.spec import Spec


def model_rows(spec: Spec, facts: Mapping[str, dict[str, Any]]) -> list[Row]:
    """The model: present everywhere, config and tokenizer identical, weights the same files."""
    m = {n: f.get("model", {}) for n, f in facts.items()}
    path = spec.model.path
    rows = [
        each(
            "model",
            f"{path} exists",
            {n: x.get("exists", False) for n, x in m.items()},
            f"copy the model to {path} on every node (e.g. rsync -a)",
        )
    ]
    if not all(x.get("exists") for x in m.values()):
        return rows
    names = sorted({name for x in m.values() for name in x["hashed"]})
    for name in names:
        rows.append(
            same(
                "model",
                name,
                {n: short(x["hashed"].get(name)) for n, x in m.items()},
                f"{name} differs between nodes: copy one node's model directory to the others",
            )
        )
    weights = {n: x["weights"] for n, x in m.items()}
    files = sorted({w for ws in weights.values() for w in ws})
    hashed = sum(1 for w in files if all(ws.get(w, {}).get("sha256") for ws in weights.values()))
    rows.append(
        same(
            "model",
            f"weights ({len(files)} files: {hashed} hashed, {len(files) - hashed} by size)",
            {n: short(json.dumps(ws, sort_keys=True)) for n, ws in weights.items()},
            "the weight files differ (names, sizes or hashes): copy them again",
        )
    )
    return rows
