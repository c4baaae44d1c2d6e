"""Keys written in the wrong place: under a runtime that ignores them, or indented under another key. Pure.

Both are easy slips in a first spec, and both used to pass or mislead: an `image:` under the
venv runtime was silently ignored, and a `serve:` block indented under `model:` was answered
with "did you mean 'served_name'".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from launcher.core.spec.container import ContainerSection
from launcher.core.spec.schema import UNKNOWN_KEY
from launcher.core.spec.sections import (
    DeploymentSection,
    EndpointSection,
    ModelSection,
    Node,
    SpecFile,
    VllmSection,
)
from launcher.errors import Problem

# Where each known key belongs, the first listed winning (`env` and `name` are top-level keys too).
SECTIONS: tuple[tuple[str, type], ...] = (
    ("", SpecFile),
    ("vllm", VllmSection),
    ("model", ModelSection),
    ("nodes[]", Node),
    ("vllm.container", ContainerSection),
    ("deployments[]", DeploymentSection),
    ("endpoint", EndpointSection),
)
# What each runtime ignores: set there, it would only mislead the next reader.
RUNTIME_KEYS = {"venv": "venv", "image": "docker"}
TOP_LEVEL = "a top-level key"


def runtime_ignored(vllm: VllmSection) -> list[Problem]:
    """vllm keys of the other runtime: an error, not a silent no-op."""
    problems = []
    for key, runtime in RUNTIME_KEYS.items():
        if getattr(vllm, key) is not None and vllm.runtime != runtime:
            problems.append(
                Problem(
                    ("vllm", key),
                    f"is only used with runtime {runtime}; runtime {vllm.runtime} ignores it",
                    f"remove it, or set vllm.runtime: {runtime}",
                )
            )
    return problems


def placed(problems: Iterable[Problem]) -> list[Problem]:
    """`problems`, each unknown key that is a known key elsewhere told where it belongs."""
    return [_placed(p) for p in problems]


def is_misplaced_section(problem: Problem) -> bool:
    """True for a top-level section (serve, vllm, nodes, model, env) found inside another."""
    key = problem.path[-1] if problem.path else None
    return problem.message == f"{key!r} is {TOP_LEVEL}, not of {_section_of(problem.path[:-1])}"


def _placed(problem: Problem) -> Problem:
    key = problem.path[-1] if problem.path else None
    if len(problem.path) < 2 or not isinstance(key, str) or problem.message != UNKNOWN_KEY.format(key):
        return problem
    home = _home(key)
    if home is None or home == _section_of(problem.path[:-1]):
        return problem
    where = TOP_LEVEL if home == "" else f"a key of {home}"
    return Problem(
        problem.path,
        f"{key!r} is {where}, not of {_section_of(problem.path[:-1])}",
        f"check the indentation: `{key}:` belongs "
        + ("at the start of its line" if home == "" else f"under `{home.split('.')[-1].rstrip('[]')}:`"),
        cause=True,
    )


def _home(key: str) -> str | None:
    for section, cls in SECTIONS:
        if key in {f.name for f in dataclasses.fields(cls)}:
            return section
    return None


def _section_of(path: tuple[str | int, ...]) -> str:
    """The section a key path is in, named as SECTIONS names it (`nodes[]` for any node)."""
    return ".".join("[]" if isinstance(p, int) else p for p in path).replace(".[]", "[]")
