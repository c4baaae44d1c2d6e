"""From a spec file to a Plan: the only file reads of the planning path (spec, config.json, catalog)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launcher.catalogs import known_versions, load_catalog
from launcher.core.catalog import Catalog
from launcher.core.model import ModelFacts, model_facts
from launcher.core.plan import Plan, PlanProblems, build_plan
from launcher.core.spec import Spec, validate_spec
from launcher.core.yamlsource import Document, load_document
from launcher.errors import Problem, SparkLaunchError


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


def catalog_for(spec: Spec) -> Catalog:
    """The flag catalog the spec's vLLM release uses; PlanProblems when there is none."""
    version = spec.vllm.flags_from or spec.vllm.version
    try:
        return load_catalog(version)
    except SparkLaunchError as exc:
        key = "flags_from" if spec.vllm.flags_from else "version"
        raise PlanProblems(
            [
                Problem(
                    ("vllm", key),
                    f"vLLM {version} is not a supported release; known: {', '.join(known_versions())}",
                    exc.hint,
                )
            ]
        ) from None


def read_model_config(spec: Spec) -> tuple[Any, bool]:
    """The model's config.json if this machine has it (else None), and whether it is a
    sentence-transformers model (modules.json: vLLM runs those as pooling models)."""
    model_dir = Path(spec.model.path)
    try:
        config: Any = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        config = None
    return config, (model_dir / "modules.json").is_file()


def read_model_facts(spec: Spec, catalog: Catalog) -> ModelFacts:
    """What the model's config.json, read here if this machine has it, tells the release's catalog."""
    config, sentence_transformers = read_model_config(spec)
    source = str(Path(spec.model.path) / "config.json")
    return model_facts(spec.model.hybrid, config, source, catalog, sentence_transformers)


def plan_file(path: str | Path) -> tuple[Spec, Plan]:
    """Read a spec file and plan it; every problem, of any stage, in one SpecError."""
    document = read_document(path)
    spec, problems = validate_spec(document.data)
    if spec is not None:
        try:
            catalog = catalog_for(spec)
            plan = build_plan(spec, read_model_facts(spec, catalog), catalog)
        except PlanProblems as exc:
            problems += exc.problems
    if problems or spec is None:
        raise document.error(problems)
    return spec, plan
