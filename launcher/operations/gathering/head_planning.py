"""Planning for the nodes: what this machine cannot read for a plan comes from the head node.

Shared by every command that plans for a cluster (check, up, supervise, verify, sync,
export systemd, `plan --from-head`). Nothing extra is asked when this machine has it all:

- the model's config.json (and whether modules.json is there), when the model is not
  readable here: one small call on the head's SSH connection, which the command's own
  fan-out then reuses. It is kept in the operator's cache for `plan` offline, and `check`
  compares every node's config.json with the one planned from.
- the flag catalog of a build without a committed one: the build's identity (its version,
  the fingerprint of its files, or the image id) in that same call, then the catalog the
  operator's cache holds for that build, or one learned from the build's own vLLM (the
  generator `make catalogs` runs, sent as a node script): once per build. It is learned from
  EVERY node of the file at once and read strictly (`core.answers.catalog_answer`: each
  option's flags its key's own), and the nodes must give the same catalog: one that differs
  is named (exit 3), and nothing is kept.
"""

from __future__ import annotations

import json
import time
from typing import Any

from launcher.cache import learned_catalog, save_catalog, save_model_files
from launcher.core import remote
from launcher.core.answers.catalog_answer import catalog_document, differences
from launcher.core.answers.planning_answer import planned
from launcher.core.answers.read import loads
from launcher.core.fleet_plan import Fleet
from launcher.core.plan import PlanProblems
from launcher.core.spec.deployments import deployment_specs
from launcher.core.spec.sections import Spec, SpecFile, VllmSection
from launcher.core.spec.yamlsource import Document
from launcher.core.vllm.catalog import Catalog, catalog_from_dict
from launcher.core.vllm.models import ModelFiles
from launcher.core.vllm.releases import Release, same_release
from launcher.core.vllm.sources import Sources
from launcher.errors import ExitStatus, Problem, SparkLaunchError
from launcher.load import committed_catalog, fleet_of, local_model_files
from launcher.node.agent import Agent
from launcher.node.executor import Executor, NodeError, fan_out
from launcher.node.scripts.learn_catalog import MARKER as CATALOG_MARKER
from launcher.operations.reporter import Reporter

__all__ = ["CatalogsDiffer", "HeadInputs", "fleet_for_nodes", "learn_catalog"]


class CatalogsDiffer(SparkLaunchError):
    """The nodes' own vLLM builds gave different flag catalogs: they do not hold the same build."""

    exit_status = ExitStatus.NODES_DISAGREE

    def __init__(self, node: str, message: str, hint: str) -> None:
        super().__init__(message, hint)
        self.node = node


def fleet_for_nodes(
    document: Document, executor: Executor, reporter: Reporter
) -> tuple[Fleet, dict[str, Sources]]:
    """Plan every deployment for its nodes, asking the head for what this machine lacks; the
    fleet and, per deployment (by its cluster name), where its plan's inputs came from. A
    SpecError when the spec does not plan, a NodeError when a head cannot answer."""
    inputs = HeadInputs(executor, reporter)
    return fleet_of(document, inputs), inputs.sources


class HeadInputs:
    """A plan's inputs from this machine where it has them, else from the head node."""

    def __init__(self, executor: Executor, reporter: Reporter) -> None:
        self.executor = executor
        self.reporter = reporter
        self.sources: dict[str, Sources] = {}
        self._read: dict[tuple[str, str], dict[str, Any]] = {}  # model answers read with the build
        self._catalog: Catalog | None = None
        self._learned: str | None = None
        self._seconds: float | None = None

    def catalog(self, file: SpecFile, release: Release) -> Catalog:
        """Committed, else this build's own: from the cache, or learned from the head's vLLM."""
        committed = committed_catalog(file, release)
        if committed is None:
            head = file.nodes[0]  # every node holds the same build (check holds them to it)
            specs = [s for s in deployment_specs(file) if s.nodes and s.head.name == head.name]
            lacking = next((s.model.path for s in specs if local_model_files(s) is None), None)
            agent = Agent(self.executor, file.name, head.name)
            answer = self._ask(agent, file.vllm, lacking)
            if lacking is not None:
                self._read[(head.name, lacking)] = answer["model"]
            committed, self._learned = _learned(file, release, answer["vllm"], agent, self.reporter)
        self._catalog = committed
        return committed

    def files(self, spec: Spec) -> ModelFiles:
        """Here, else as the deployment's head holds them (kept in the operator's cache)."""
        files = local_model_files(spec)
        if files is None:
            found = self._read.get((spec.head.name, spec.model.path))
            if found is None:
                found = self._ask(Agent(self.executor, spec.name, spec.head.name), None, spec.model.path)[
                    "model"
                ]
            files = _head_files(spec, found)
        assert self._catalog is not None  # catalog() comes first
        self.sources[spec.name] = Sources(files, self._catalog, self._learned, self._seconds)
        return files

    def _ask(self, agent: Agent, vllm: VllmSection | None, model: str | None) -> dict[str, Any]:
        """One call for the model's files and/or the build's identity; said with how long it took."""
        request: dict[str, Any] = {"model": model} if model else {}
        if vllm is not None:
            request.update({"venv": vllm.venv} if vllm.runtime == "venv" else {"image": vllm.image})
        began = time.monotonic()
        answer = agent.ask(remote.planning_call(agent.dir, request), planned)
        self._seconds = time.monotonic() - began
        asked = [w for w, need in (("the model's config.json", model), ("its vLLM build", vllm)) if need]
        self.reporter.info(f"read from {agent.node}: {' and '.join(asked)} ({self._seconds:.2f} s)")
        return answer


def _head_files(spec: Spec, found: dict[str, Any]) -> ModelFiles:
    """The model files as the head holds them (kept in the operator's cache), or nothing known."""
    head = spec.head.name
    if found.get("config") is None:
        return ModelFiles(spec.model.path, None, bool(found.get("modules")), head)
    try:
        config: Any = json.loads(found["config"])
    except (ValueError, RecursionError):
        config = None  # the plan says it is not a JSON object
    files = ModelFiles(
        spec.model.path,
        config,
        bool(found.get("modules")),
        head,
        found.get("sha256"),
        weight_bytes=found.get("weight_bytes") or None,
    )
    if isinstance(config, dict):
        save_model_files(spec.head.ssh, files)
    return files


def _learned(
    spec: SpecFile, release: Release, build: dict[str, Any], agent: Agent, reporter: Reporter
) -> tuple[Catalog, str]:
    """The catalog of the head's own build: from the operator's cache, or learned from its vLLM now."""
    head, version = agent.node, spec.vllm.version
    reported = build.get("version")
    if reported is not None and not same_release(version, reported):
        raise PlanProblems(
            [
                Problem(
                    ("vllm", "version"),
                    f"is {version}, but the head {head} has vLLM {reported}",
                    f'write the version the nodes report: vllm.version: "{reported}"',
                )
            ]
        )
    fingerprint = build.get("build")
    if not fingerprint:
        where = spec.vllm.venv if spec.vllm.runtime == "venv" else spec.vllm.image
        raise PlanProblems(
            [
                Problem(
                    ("vllm", "venv" if spec.vllm.runtime == "venv" else "image"),
                    f"vLLM {version} has no committed flag catalog, and {head} has no vLLM at {where} "
                    f"to learn it from ({build.get('error') or 'not found'})",
                    "install it there (the same build on every node), or fix the path",
                )
            ]
        )
    found = learned_catalog(version, fingerprint)
    if found is not None:
        cached = f"learned from {_learned_from(found[1], head)}'s own vLLM earlier (cached)"
        reporter.info(f"the flags of vLLM {version}: the catalog {cached}")
        return found[0], cached
    names = [n.name for n in spec.nodes]
    reporter.info(
        f"learning the flags of vLLM {version} ({release.rules_of}'s rules) from the own vLLM of "
        f"{', '.join(names)}: no catalog for this build here yet (once per build)"
    )
    began = time.monotonic()
    data = _learn_everywhere(agent.executor, spec, names)
    seconds = time.monotonic() - began
    learned = {
        "node": head,
        "nodes": names,
        "version": reported or version,
        "build": fingerprint,
        "seconds": round(seconds, 1),
    }
    save_catalog(version, fingerprint, data, learned)
    whence = _learned_from(learned, head)
    return catalog_from_dict(data, f"learned from {whence}'s own vLLM {learned['version']}"), (
        f"learned from {whence}'s own vLLM now ({seconds:.1f} s)"
    )


def _learned_from(learned: dict[str, Any], head: str) -> str:
    """The nodes a catalog was learned from, for people: `n1, n2`."""
    nodes = learned.get("nodes")
    if isinstance(nodes, list) and nodes and all(isinstance(n, str) for n in nodes):
        return ", ".join(nodes)
    return str(learned.get("node") or head)


def _learn_everywhere(executor: Executor, spec: SpecFile, names: list[str]) -> dict[str, Any]:
    """The catalog of every node's own vLLM, at once; the head's when all agree (CatalogsDiffer
    naming the first node that does not; a node's error, naming it, when one cannot answer)."""
    found = fan_out(names, lambda name: learn_catalog(Agent(executor, spec.name, name), spec))
    for name in names:  # rank order: the head's error first
        answer = found[name]
        if isinstance(answer, SparkLaunchError):
            raise answer
    head, data = names[0], found[names[0]]
    assert isinstance(data, dict)
    for name in names[1:]:
        other = found[name]
        assert isinstance(other, dict)
        if other != data:
            raise CatalogsDiffer(
                name,
                f"node {name}: its vLLM's flag catalog differs from {head}'s "
                f"({', '.join(differences(data, other))}): the nodes do not hold the same vLLM build",
                "install the same vLLM build on every node (`spark-launch check` compares them)",
            )
    return data


def learn_catalog(agent: Agent, spec: Spec | SpecFile) -> dict[str, Any]:
    """The catalog of the node's own vLLM (its runtime as the spec says): the generator of
    `make catalogs`, run there with vLLM's own python; read strictly, like every node's answer
    (`core.answers.catalog_answer`): a forged option is a NodeError naming the node."""
    result = agent.run(remote.catalog_call(spec.vllm, spec.name))
    lines = [line for line in result.stdout.splitlines() if line.startswith(CATALOG_MARKER)]
    if not lines:
        tail = (result.stderr or result.stdout).strip().splitlines()[-2:]
        raise NodeError(
            agent.node,
            f"its vLLM could not write its flag catalog: {' / '.join(tail) or f'exit {result.exited}'}",
            "run `spark-launch check` again; if it persists, set vllm.flags_from to a supported release",
        )
    with agent.reading("the node script learn_catalog"):
        return catalog_document(loads(lines[-1][len(CATALOG_MARKER) :]))
