"""The boundary from a spec file to a Plan: the only file reads of the planning path."""

from __future__ import annotations

from pathlib import Path

from launcher.errors import SparkLaunchError
from launcher.model import model_facts
from launcher.plan import Plan, PlanProblems, build_plan
from launcher.spec import Spec, parse_spec, validate_spec
from launcher.yamlsource import Document, load_document


def read_document(path: str | Path) -> Document:
    """Read a spec file as YAML; a SparkLaunchError when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SparkLaunchError(
            f"cannot read spec {path}: {exc.strerror or exc}",
            "give the path of a deployment YAML, e.g. configs/demo.yaml",
        ) from None
    except UnicodeDecodeError:
        raise SparkLaunchError(f"spec {path} is not UTF-8 text") from None
    return load_document(text, str(path))


def read_spec(path: str | Path) -> Spec:
    """Read and validate a spec file; SpecError lists every problem with its line."""
    return parse_spec(read_document(path))


def plan_file(path: str | Path) -> tuple[Spec, Plan]:
    """Read a spec file and plan it; every problem, of any stage, in one SpecError."""
    document = read_document(path)
    spec, problems = validate_spec(document.data)
    if spec is not None:
        facts = model_facts(spec.model.path, spec.model.hybrid)
        try:
            plan = build_plan(spec, facts)
        except PlanProblems as exc:
            problems += exc.problems
    if problems or spec is None:
        raise document.error(problems)
    return spec, plan
