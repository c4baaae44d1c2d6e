"""From loaded YAML data to a Spec: build the typed sections, then every cross-field check."""

from __future__ import annotations

from typing import Any

from launcher.core.spec.deployments import MODEL_REQUIRED, check_file
from launcher.core.spec.misplaced import is_misplaced_section, placed
from launcher.core.spec.schema import build
from launcher.core.spec.sections import Spec, SpecFile
from launcher.core.spec.spec_checks import check_spec
from launcher.errors import Problem


def validate_file(data: Any) -> tuple[SpecFile | None, list[Problem]]:
    """Validate a spec file's data: the SpecFile when it could be built (even with problems), and
    every problem."""
    problems: list[Problem] = []
    file = build(SpecFile, data, (), problems)
    problems = placed(problems)
    misplaced = any(is_misplaced_section(p) for p in problems)
    if not isinstance(file, SpecFile):
        # Reported even when the rest could not be built: a model is as required as the nodes
        # (unless it was written in another section: that problem says where it belongs).
        lacking = isinstance(data, dict) and not {"model", "deployments"} & set(data) and not misplaced
        return None, problems + ([MODEL_REQUIRED] if lacking else [])
    problems += check_file(file)
    # A section written inside another is missing where it belongs: planning what is left would
    # only report the consequences (no serve: "tensor parallel 1, but 2 GPUs").
    return (None if any(is_misplaced_section(p) for p in problems) else file), problems


def validate_spec(data: Any) -> tuple[Spec | None, list[Problem]]:
    """Validate one deployment's data (model and serve at the top): the Spec when it could be built."""
    problems: list[Problem] = []
    spec = build(Spec, data, (), problems)
    problems = placed(problems)
    if not isinstance(spec, Spec):
        return None, problems
    problems += check_spec(spec)
    # A section written inside another is missing where it belongs: planning what is left would
    # only report the consequences (no serve: "tensor parallel 1, but 2 GPUs").
    return (None if any(is_misplaced_section(p) for p in problems) else spec), problems
