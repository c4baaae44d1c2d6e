"""A check's result: rows of every node's value, and the two ways a row passes. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any

from launcher.core.answers.facts_answer import Facts
from launcher.core.checks.budget import Budget
from launcher.errors import ExitStatus


@dataclass(frozen=True, slots=True)
class Row:
    """One compared item: every node's value, and whether they pass."""

    area: str
    item: str
    values: dict[str, Any]
    ok: bool
    hint: str | None = None
    level: str = "fail"  # what a failing row means: fail, or warn (reported, not blocking)

    @property
    def failed(self) -> bool:
        """True when this row blocks a start."""
        return not self.ok and self.level == "fail"


@dataclass(frozen=True, slots=True)
class Report:
    """Every row of a check, in order."""

    nodes: tuple[str, ...]
    rows: tuple[Row, ...] = field(default_factory=tuple)
    facts: Mapping[str, Facts] = field(default_factory=dict, compare=False, repr=False)  # as reported
    memory: Mapping[str, Budget] = field(default_factory=dict)  # each node's, when it was weighed

    @property
    def ok(self) -> bool:
        """True when nothing blocks a start."""
        return not any(r.failed for r in self.rows)

    @property
    def unreachable(self) -> bool:
        """True when a node could not be asked at all."""
        return any(r.failed and r.area == "ssh" for r in self.rows)

    @property
    def exit_status(self) -> ExitStatus:
        """OK when alike, UNREACHABLE when a node could not be asked, else NODES_DISAGREE."""
        if self.ok:
            return ExitStatus.OK
        return ExitStatus.UNREACHABLE if self.unreachable else ExitStatus.NODES_DISAGREE


def same(
    area: str, item: str, values: Mapping[str, Any], hint: str, expected: Any = None, level: str = "fail"
) -> Row:
    """A row that passes when every node has the same value (and it equals `expected` if given)."""
    distinct = {json.dumps(v, sort_keys=True, default=str) for v in values.values()}
    ok = len(distinct) == 1 and (expected is None or next(iter(values.values())) == expected)
    return Row(area, item, dict(values), ok, None if ok else hint, level)


def each(area: str, item: str, values: Mapping[str, Any], hint: str, level: str = "fail") -> Row:
    """A row that passes when every node's value is true."""
    ok = all(bool(v) for v in values.values())
    return Row(area, item, dict(values), ok, None if ok else hint, level)


def short(value: Any) -> Any:
    """A hash shortened for the table; other values unchanged."""
    if isinstance(value, str) and len(value) >= 32:
        return sha256(value.encode()).hexdigest()[:12] if not value.isalnum() else value[:12]
    return value
