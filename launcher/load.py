"""From a spec file to a Plan: the only file reads of the planning path (spec, config.json, catalog)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.catalogs import known_versions, load_catalog
from launcher.core.fleet import Fleet, build_fleet, port_problems
from launcher.core.plan import Plan, PlanProblems, build_plan
from launcher.core.spec.checks import release_problem
from launcher.core.spec.deployments import deployment_specs, relocate
from launcher.core.spec.sections import Spec, SpecFile
from launcher.core.spec.validate import validate_file
from launcher.core.spec.yamlsource import MAX_BYTES, Document, decode, load_document
from launcher.core.vllm.catalog import Catalog
from launcher.core.vllm.models import ModelFacts, model_facts
from launcher.errors import ExitStatus, InputError, Problem, SparkLaunchError, one_line

if TYPE_CHECKING:  # only --compare-release needs it: not paid by every plan
    from launcher.core.receipts.release import Comparison


class UnknownRelease(SparkLaunchError):
    """A release with no committed catalog, named where one is required."""

    exit_status = ExitStatus.BAD_SPEC


MAX_CONFIG = 16 << 20  # a model's config.json is a few KiB; a larger one is not read whole


def read_document(path: str | Path) -> Document:
    """Read a spec file as YAML; a SparkLaunchError when it cannot be read, a SpecError when bad."""
    try:
        with Path(path).open("rb") as f:
            data = f.read(MAX_BYTES + 1)  # no more: /dev/zero is a path too
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise InputError(
            f"cannot read spec {one_line(str(path))}: {getattr(exc, 'strerror', None) or exc}",
            "give the path of a deployment YAML, e.g. configs/demo.yaml",
        ) from None
    return load_document(decode(data, str(path)), str(path))


def catalog_for(spec: Spec | SpecFile) -> Catalog:
    """The flag catalog the spec's vLLM release uses; PlanProblems when there is none."""
    key = "flags_from" if spec.vllm.flags_from else "version"
    version = spec.vllm.flags_from or spec.vllm.version
    malformed = release_problem(("vllm", key), version)
    if malformed:  # checked before the known list: such a text never names a file
        raise PlanProblems([malformed])
    try:
        return load_catalog(version)
    except SparkLaunchError as exc:
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
    config_file = model_dir / "config.json"
    config: Any = None
    try:
        # A regular file of sane size: a FIFO or a device would block or never end.
        if config_file.is_file() and config_file.stat().st_size <= MAX_CONFIG:
            config = json.loads(config_file.read_bytes())
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested without end
        config = None
    return config, (model_dir / "modules.json").is_file()


def read_model_facts(spec: Spec, catalog: Catalog) -> ModelFacts:
    """What the model's config.json, read here if this machine has it, tells the release's catalog."""
    config, sentence_transformers = read_model_config(spec)
    source = str(Path(spec.model.path) / "config.json")
    return model_facts(spec.model.hybrid, config, source, catalog, sentence_transformers)


def plan_fleet(path: str | Path) -> Fleet:
    """Read a spec file and plan every deployment; every problem, of any stage, in one SpecError."""
    document = read_document(path)
    file, problems = validate_file(document.data)
    fleet = None
    if file is not None:
        specs = deployment_specs(file)
        plans = _plans(file, specs, problems)
        if len(plans) == len(specs) and specs:
            problems += port_problems(file, specs, plans)
            fleet = build_fleet(file, specs, plans)
    if problems or fleet is None:
        raise document.error(list(dict.fromkeys(problems)))  # planning repeats a few spec checks
    return fleet


def _plans(file: SpecFile, specs: tuple[Spec, ...], problems: list[Problem]) -> tuple[Plan, ...]:
    """Each deployment's plan; what cannot be planned goes to `problems`, located in the file."""
    try:
        catalog = catalog_for(file)
    except PlanProblems as exc:
        problems += exc.problems
        return ()
    plans = []
    for i, spec in enumerate(specs):
        if not spec.nodes:  # none of its nodes is known: the spec checks said so, where it is written
            continue
        try:
            plans.append(build_plan(spec, read_model_facts(spec, catalog), catalog))
        except PlanProblems as exc:
            problems += [relocate(file, i, p) for p in exc.problems]
    return tuple(plans)


def plan_file(path: str | Path) -> tuple[Spec, Plan]:
    """Read a spec file of one deployment and plan it (a SparkLaunchError for several)."""
    fleet = plan_fleet(path)
    if fleet.multi:
        raise SparkLaunchError(
            f"{one_line(str(path))} holds {len(fleet.deployments)} deployments; this command takes a "
            "spec of one",
            "write a spec with one deployment (model: and serve: at the top) for it",
        )
    only = fleet.deployments[0]
    return only.spec, only.plan


def compare_file(path: str | Path, version: str) -> Comparison:
    """Plan a spec file for its release and for `version`; what moving to `version` changes."""
    from launcher.core.receipts.release import compare_release

    spec, plan = plan_file(path)
    if version not in known_versions():
        raise UnknownRelease(
            f"no catalog for vLLM {one_line(version)} to compare with; known: {', '.join(known_versions())}",
            "--compare-release takes a supported release (see the README: adding a release)",
        )
    new = load_catalog(version)
    moved = dataclasses.replace(spec, vllm=dataclasses.replace(spec.vllm, version=version, flags_from=None))
    return compare_release(spec, plan, catalog_for(spec), new, read_model_facts(moved, new))
