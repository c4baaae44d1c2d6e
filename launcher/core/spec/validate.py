"""From loaded YAML data to a Spec: build the typed sections, then every cross-field check."""

from __future__ import annotations

from typing import Any

from launcher.core.spec.checks import check_spec
from launcher.core.spec.misplaced import is_misplaced_section, placed
from launcher.core.spec.schema import build
from launcher.core.spec.sections import Spec
from launcher.errors import Problem


def validate_spec(data: Any) -> tuple[Spec | None, list[Problem]]:
    """Validate loaded data: the Spec when it could be built (even with problems), and every problem."""
    problems: list[Problem] = []
    spec = build(Spec, data, (), problems)
    problems = placed(problems)
    if not isinstance(spec, Spec):
        return None, problems
    problems += check_spec(spec)
    # A section written inside another is missing where it belongs: planning what is left would
    # only report the consequences (no serve: "tensor parallel 1, but 2 GPUs").
    return (None if any(is_misplaced_section(p) for p in problems) else spec), problems
