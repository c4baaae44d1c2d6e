"""The boundary from a spec file to a Plan: the only file reads of the planning path."""

from __future__ import annotations

from pathlib import Path

from launcher.errors import SparkLaunchError
from launcher.model import model_facts
from launcher.plan import Plan, PlanProblems, build_plan
from launcher.spec import Spec, parse_spec
from launcher.yamlsource import Document, load_document


def read_spec(path: str | Path) -> tuple[Spec, Document]:
    """Read and validate a spec file; SpecError lists every problem with its line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SparkLaunchError(f"cannot read spec {path}: {exc.strerror or exc}",
                               "give the path of a deployment YAML, e.g. configs/demo.yaml") from None
    except UnicodeDecodeError:
        raise SparkLaunchError(f"spec {path} is not UTF-8 text") from None
    document = load_document(text, str(path))
    return parse_spec(document), document


def plan_file(path: str | Path) -> tuple[Spec, Plan]:
    """Read a spec file and plan it; any problem is a SpecError located in that file."""
    spec, document = read_spec(path)
    facts = model_facts(spec.model.path, spec.model.hybrid)
    try:
        return spec, build_plan(spec, facts)
    except PlanProblems as exc:
        raise document.error(exc.problems) from None
