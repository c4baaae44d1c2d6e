"""From a spec file to a Plan: the planning path's reads on this machine (spec, model, catalog).

Offline (`plan`, `validate`, and the commands that only reach a running cluster): the
model's config.json where spark-launch runs, else the copy read from the head earlier
(`launcher.cache`); a committed catalog, else one learned from the head earlier. The
commands that plan for the nodes read what is missing from the head instead
(`commands.planning`: other `Inputs` for the same `fleet_of`).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from launcher.cache import cached_model_files, learned_catalog
from launcher.catalogs import known_versions, load_catalog, router_key
from launcher.core.fleet_plan import Fleet, build_fleet, port_problems
from launcher.core.plan import Plan, PlanProblems, build_plan
from launcher.core.rules.base import Sharing
from launcher.core.rules.caching import SETTLE
from launcher.core.spec.deployments import deployment_specs, relocate
from launcher.core.spec.sections import Spec, SpecFile
from launcher.core.spec.spec_checks import release_problem
from launcher.core.spec.validate import validate_file
from launcher.core.spec.yamlsource import MAX_BYTES, Document, decode, load_document
from launcher.core.vllm.catalog import Catalog
from launcher.core.vllm.models import WEIGHT_SUFFIXES, ModelFacts, ModelFiles, facts_of
from launcher.core.vllm.releases import Release, UnknownRules, release_for
from launcher.errors import ExitStatus, InputError, Problem, SparkLaunchError, SpecError, one_line

if TYPE_CHECKING:  # only --compare-release needs it: not paid by every plan
    from launcher.core.receipts.upgrade import Comparison


class UnknownRelease(SparkLaunchError):
    """A release with no committed catalog, named where one is required."""

    exit_status = ExitStatus.BAD_SPEC


MAX_CONFIG = 16 << 20  # a model's config.json is a few KiB; a larger one is not read whole
LEARN = (
    "`spark-launch plan --from-head SPEC` learns its flags from the head node's own vLLM "
    "(check, up and the other commands that reach the nodes do so by themselves); or set "
    "vllm.flags_from to a supported release, at your own risk"
)


class Inputs(Protocol):
    """What a plan reads besides the spec: the build's flag catalog, each deployment's model files."""

    def catalog(self, file: SpecFile, release: Release) -> Catalog:
        """The catalog the file's vLLM plans with; PlanProblems when there is none."""

    def files(self, spec: Spec) -> ModelFiles:
        """The deployment's model files (config.json None when not known)."""


class Offline:
    """This machine's files and the operator's cache only: nothing is asked of a node."""

    def catalog(self, file: SpecFile, release: Release) -> Catalog:
        """Committed, else learned from the head earlier."""
        return offline_catalog(file, release)

    def files(self, spec: Spec) -> ModelFiles:
        """Here, else as read from the head earlier."""
        return offline_model_files(spec)


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


def release_of(spec: Spec | SpecFile) -> Release:
    """Whose rules and which committed catalog the spec's vLLM version gets; PlanProblems when none."""
    problems = [p for p in (release_problem(("vllm", "version"), spec.vllm.version),) if p]
    if spec.vllm.flags_from:
        problems += _flags_from_problems(spec.vllm.flags_from)
    if problems:
        raise PlanProblems(problems)
    try:
        return release_for(spec.vllm.version, known_versions())
    except UnknownRules as exc:
        raise PlanProblems([Problem(("vllm", "version"), str(exc), exc.hint)]) from None


def _flags_from_problems(version: str) -> list[Problem]:
    malformed = release_problem(("vllm", "flags_from"), version)
    if malformed:
        return [malformed]
    if version in known_versions():
        return []
    known = ", ".join(known_versions())
    hint = "remove it: a build's own flags are learned from its vLLM on the head"
    return [
        Problem(("vllm", "flags_from"), f"vLLM {version} is not a supported release; known: {known}", hint)
    ]


def committed_catalog(spec: Spec | SpecFile, release: Release) -> Catalog | None:
    """The committed catalog the spec uses (vllm.flags_from, or its release's), or None."""
    version = spec.vllm.flags_from or release.catalog
    return load_catalog(version) if version else None


def offline_catalog(spec: Spec | SpecFile, release: Release) -> Catalog:
    """The committed catalog, else the newest learned for this version; PlanProblems when neither."""
    catalog = committed_catalog(spec, release)
    if catalog is not None:
        return catalog
    learned = learned_catalog(spec.vllm.version)
    if learned is None:
        known = ", ".join(known_versions())
        message = f"vLLM {spec.vllm.version} has no flag catalog here (committed: {known})"
        raise PlanProblems([Problem(("vllm", "version"), message, LEARN)])
    return learned[0]


def catalog_for(spec: Spec | SpecFile) -> Catalog:
    """The catalog an offline plan of `spec` uses; PlanProblems when there is none."""
    return offline_catalog(spec, release_of(spec))


def local_model_files(spec: Spec) -> ModelFiles | None:
    """The model's config.json (and modules.json) where spark-launch runs; None when absent here."""
    model_dir = Path(spec.model.path)
    config_file = model_dir / "config.json"
    data = b""
    try:
        # A regular file of sane size: a FIFO or a device would block or never end.
        if not config_file.is_file():
            return None
        data = config_file.read_bytes() if config_file.stat().st_size <= MAX_CONFIG else b""
        config: Any = json.loads(data)
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested without end
        config = None
    digest = sha256(data).hexdigest() if data else None
    modules = (model_dir / "modules.json").is_file()
    return ModelFiles(spec.model.path, config, modules, sha256=digest, weight_bytes=weight_bytes(model_dir))


def weight_bytes(model_dir: Path) -> int | None:
    """The size of the model's weight files (as `check` counts them), or None when it has none here."""
    try:
        sizes = [f.stat().st_size for f in model_dir.iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file()]
    except OSError:
        return None
    return sum(sizes) or None


def offline_model_files(spec: Spec) -> ModelFiles:
    """Here, else as read from the head earlier, else nothing known (the plan then says so)."""
    local = local_model_files(spec)
    if local is not None:
        return local
    cached = cached_model_files(spec.head.ssh, spec.model.path) if spec.nodes else None
    return cached or ModelFiles(spec.model.path, None)


def lacking_here(spec: Spec) -> bool:
    """True when planning offline lacks what only the head can give: the model's config.json (not
    here, not read earlier), or the build's catalog (not committed, not learned earlier)."""
    try:
        release = release_of(spec)
    except PlanProblems:
        return False
    cached = cached_model_files(spec.head.ssh, spec.model.path) if spec.nodes else None
    no_model = local_model_files(spec) is None and cached is None
    no_catalog = committed_catalog(spec, release) is None and learned_catalog(spec.vllm.version) is None
    return no_model or no_catalog


def read_model_facts(spec: Spec, catalog: Catalog) -> ModelFacts:
    """What the model's files, read here (or from the head earlier), tell the release's catalog."""
    return facts_of(offline_model_files(spec), spec.model, catalog)


def plan_with(
    spec: Spec,
    files: ModelFiles,
    catalog: Catalog,
    release: Release,
    deployments: Mapping[str, int] | None = None,
) -> Plan:
    """The plan of `spec` with these model files and catalog; PlanProblems listing what is wrong.
    `deployments`: how many of the file's deployments run on each node (they share its memory).

    A version that is not a supported release as published gets a first note saying whose
    rules and which flags it has, and why.
    """
    sharing = Sharing(deployments or {}, files.weight_bytes)
    plan = build_plan(spec, facts_of(files, spec.model, catalog), catalog, sharing)
    notes = [release.why] if release.why else []
    if catalog.source:
        notes.append(f"flags and model traits: the catalog {catalog.source}")
    return dataclasses.replace(plan, notes=(*notes, *plan.notes)) if notes else plan


def read_file(path: str | Path) -> tuple[Document, SpecFile]:
    """Read and validate a spec file; a SpecError with every problem of the file itself."""
    document = read_document(path)
    file, problems = validate_file(document.data)
    if problems or file is None:
        raise document.error(problems)
    return document, file


@dataclass(frozen=True, slots=True)
class Judged:
    """A spec file judged on this machine, before any node is asked: its document, its file, the
    offline plan when it plans here (None when only the head can settle what is left: `pending`),
    and the ssh_config file to use."""

    document: Document
    file: SpecFile
    fleet: Fleet | None
    pending: SpecError | None
    ssh_config: str | None


def judge(
    path: str | Path,
    ssh_config: str | None = None,
    secrets: Mapping[str, str] | None = None,
    document: Document | None = None,
    connect: bool = True,
) -> Judged:
    """Every problem this machine can find in a spec file, before any connection: what `validate`
    reports, the spec's ssh_config file missing, and (given this environment as `secrets`) each
    secret the spec names that is not set in it. One SpecError with all of them, causes first;
    only what the head alone can settle (the model's kind where its config.json is not here, the
    flags of a build without a catalog here) is left `pending` for the commands that reach it.
    `ssh_config`: the --ssh-config option (an InputError when that file is missing); `document`:
    the file, when read already; `connect`: the command connects (else its ssh_config file is
    not needed here: `up --dry-run`)."""
    document = document or read_document(path)
    file, problems = validate_file(document.data)
    if file is None:
        raise document.error(problems)
    config = ssh_config_path(path, ssh_config, file.ssh_config)
    problems += _here_problems(file, ssh_config, config if connect else None, secrets)
    fleet, planned = _planned(document, file, problems)
    lacking = any(lacking_here(s) for s in deployment_specs(file) if s.nodes)
    final = [p for p in planned if not (lacking and settled_by_head(p))]
    if final:
        raise document.error(planned)
    pending = document.error(planned) if planned else None
    return Judged(document, file, fleet, pending, config)


def settled_by_head(problem: Problem) -> bool:
    """A problem the head's own files settle: the model's kind (its config.json), a build's flags."""
    return problem.hint in (SETTLE, LEARN)


def ssh_config_path(spec_path: str | Path, given: str | None, in_spec: str | None) -> str | None:
    """The ssh_config to use: the option's, else the spec's (relative to the spec's folder)."""
    config = given or in_spec
    if config and not given and not Path(config).expanduser().is_absolute():
        config = str(Path(spec_path).parent / config)
    return config


def _here_problems(
    file: SpecFile, given: str | None, config: str | None, secrets: Mapping[str, str] | None
) -> list[Problem]:
    """What this machine lacks for the spec: its ssh_config file, the secrets' values."""
    if given is not None and not Path(given).expanduser().is_file():
        raise InputError(
            f"ssh_config file {one_line(given)} does not exist", "fix --ssh-config, or leave it out"
        )
    problems = []
    if given is None and config is not None and not Path(config).expanduser().is_file():
        problems.append(
            Problem(
                ("ssh_config",),
                f"the file {one_line(config)} does not exist",
                "fix the path (a relative one is read from the spec's folder), or remove the key to "
                "use ~/.ssh/config",
            )
        )
    for i, name in enumerate(file.secrets if secrets is not None else ()):
        if name not in secrets:  # type: ignore[operator]
            problems.append(
                Problem(
                    ("secrets", i),
                    f"{name} is not set in this environment",
                    f"export {name}=... where you run spark-launch (its value never reaches argv, "
                    "logs or the plan)",
                )
            )
    return problems


def _planned(
    document: Document, file: SpecFile, problems: list[Problem]
) -> tuple[Fleet | None, list[Problem]]:
    """The offline plan of a valid-enough file, and every problem (the file's and the plan's)."""
    specs = deployment_specs(file)
    plans = _plans(file, specs, problems, Offline())
    fleet = None
    if len(plans) == len(specs) and specs:
        problems += port_problems(file, specs, plans)
        if not problems:
            fleet = build_fleet(file, specs, plans, _router_venv(file))
    return fleet, list(dict.fromkeys(problems))


def _router_venv(file: SpecFile) -> str:
    """Where the endpoint's router runs when the spec names no venv: the launcher's own, on the
    head, keyed by the router lock's hash (read only for a spec with such an endpoint)."""
    if file.endpoint is None or file.endpoint.venv is not None:
        return ""
    from launcher.core.router import managed_venv  # a spec with an endpoint only

    return managed_venv(router_key())


def plan_fleet(path: str | Path, inputs: Inputs | None = None) -> Fleet:
    """Read a spec file and plan every deployment (offline unless `inputs` says otherwise);
    every problem, of any stage, in one SpecError."""
    return fleet_of(read_document(path), inputs)


def fleet_of(document: Document, inputs: Inputs | None = None) -> Fleet:
    """Plan every deployment of a loaded spec file; every problem in one SpecError."""
    file, problems = validate_file(document.data)
    fleet = None
    if file is not None:
        specs = deployment_specs(file)
        plans = _plans(file, specs, problems, inputs or Offline())
        if len(plans) == len(specs) and specs:
            problems += port_problems(file, specs, plans)
            fleet = build_fleet(file, specs, plans, _router_venv(file))
    if problems or fleet is None:
        raise document.error(list(dict.fromkeys(problems)))  # planning repeats a few spec checks
    return fleet


def _plans(
    file: SpecFile, specs: tuple[Spec, ...], problems: list[Problem], inputs: Inputs
) -> tuple[Plan, ...]:
    """Each deployment's plan; what cannot be planned goes to `problems`, located in the file."""
    try:
        release = release_of(file)
        catalog = inputs.catalog(file, release)
    except PlanProblems as exc:
        problems += exc.problems
        return ()
    plans = []
    deployments = Counter(node.name for spec in specs for node in spec.nodes)
    for i, spec in enumerate(specs):
        if not spec.nodes:  # none of its nodes is known: the spec checks said so, where it is written
            continue
        try:
            plans.append(plan_with(spec, inputs.files(spec), catalog, release, deployments))
        except PlanProblems as exc:
            problems += [relocate(file, i, p) for p in exc.problems]
    return tuple(plans)


def only(fleet: Fleet, path: str | Path) -> tuple[Spec, Plan]:
    """The one deployment of a fleet (a SparkLaunchError for several)."""
    if fleet.multi:
        raise SparkLaunchError(
            f"{one_line(str(path))} holds {len(fleet.deployments)} deployments; this command takes a "
            "spec of one",
            "write a spec with one deployment (model: and serve: at the top) for it",
        )
    first = fleet.deployments[0]
    return first.spec, first.plan


def plan_file(path: str | Path) -> tuple[Spec, Plan]:
    """Read a spec file of one deployment and plan it offline (a SparkLaunchError for several)."""
    return only(plan_fleet(path), path)


def compare_file(path: str | Path, version: str) -> Comparison:
    """Plan a spec file for its release and for `version`; what moving to `version` changes."""
    from launcher.core.receipts.upgrade import compare_release

    spec, plan = plan_file(path)
    if version not in known_versions():
        raise UnknownRelease(
            f"no catalog for vLLM {one_line(version)} to compare with; known: {', '.join(known_versions())}",
            "--compare-release takes a supported release (CONTRIBUTING.md: adding a vLLM release)",
        )
    new = load_catalog(version)
    moved = dataclasses.replace(spec, vllm=dataclasses.replace(spec.vllm, version=version, flags_from=None))
    sharing = Sharing({}, offline_model_files(spec).weight_bytes)  # one deployment, as plan_file planned it
    return compare_release(spec, plan, catalog_for(spec), new, read_model_facts(moved, new), sharing)
