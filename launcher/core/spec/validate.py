"""From loaded YAML data to a Spec: build the typed sections, then every cross-field check."""

from __future__ import annotations

from typing import Any

from launcher.core.spec.checks import check_spec
from launcher.core.spec.deployments import MODEL_REQUIRED, check_file
from launcher.core.spec.schema import build
from launcher.core.spec.sections import Spec, SpecFile
from launcher.errors import Problem


def validate_file(data: Any) -> tuple[SpecFile | None, list[Problem]]:
    """Validate a spec file's data: the SpecFile when it could be built (even with problems), and
    every problem."""
    problems: list[Problem] = []
    file = build(SpecFile, data, (), problems)
    if not isinstance(file, SpecFile):
        # Reported even when the rest could not be built: a model is as required as the nodes.
        lacking = isinstance(data, dict) and not {"model", "deployments"} & set(data)
        return None, problems + ([MODEL_REQUIRED] if lacking else [])
    return file, problems + check_file(file)


def validate_spec(data: Any) -> tuple[Spec | None, list[Problem]]:
    """Validate one deployment's data (model and serve at the top): the Spec when it could be built."""
    problems: list[Problem] = []
    spec = build(Spec, data, (), problems)
    if not isinstance(spec, Spec):
        return None, problems
    return spec, problems + check_spec(spec)
