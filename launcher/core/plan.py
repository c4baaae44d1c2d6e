"""Spec + model facts -> Plan: every value decided, with the reason for each. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from hashlib import sha256
from typing import Any

from launcher.core.render import NodeCommand, render_nodes
from launcher.core.rows import Derived, model_rows, runner_set, topology_rows
from launcher.core.rules import RULES, Inputs, RuleProblem, Unresolved
from launcher.core.rules.base import Sharing
from launcher.core.rules.removed import env_problems, speculative_problems
from launcher.core.spec.container import changed_from_defaults
from launcher.core.spec.schema import suggest
from launcher.core.spec.sections import Spec
from launcher.core.spec.spec_checks import NO_NODES, release_problem
from launcher.core.spec.versions import parse
from launcher.core.vllm.argv import BadValue, check_value, option_args
from launcher.core.vllm.catalog import CODE_OR_FILES, Catalog
from launcher.core.vllm.models import ModelFacts
from launcher.errors import Problem

# serve keys the launcher sets per node, or from elsewhere in the spec.
LAUNCHER_ONLY = (
    "node_rank",
    "headless",
    "nnodes",
    "master_addr",
    "distributed_executor_backend",
    "data_parallel_rank",
    "data_parallel_address",
)
SPEC_OWNED = {
    "model": "model.path",
    "model_tag": "model.path",
    "served_model_name": "model.served_name",
    "host": "api.listen",
}
# Options whose value is a secret: on the command line it would show in `ps` and logs.
SECRET_OPTIONS = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}


# serve keys a rule renders itself, where it applies.
RULE_OWNED = frozenset(key for rule in RULES for key in rule.owns)


class PlanProblems(Exception):
    """The spec cannot be planned; carries every Problem, located by key path."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(f"{len(problems)} problem(s)")
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything `up` will do, decided before anything runs."""

    cluster: str
    vllm_version: str
    catalog_version: str
    runtime: str
    nodes: tuple[NodeCommand, ...]
    derived: tuple[Derived, ...]
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()  # what an operator must hear (validate, plan and up say them)

    def value(self, setting: str) -> Any:
        """The decided value of a derived setting (KeyError when the plan has none)."""
        for d in self.derived:
            if d.setting == setting:
                return d.value
        raise KeyError(setting)

    @property
    def api_port(self) -> int:
        """The head's API port, as pinned."""
        return int(self.value("port"))

    @property
    def api_listen(self) -> str:
        """The address the head's API binds (vLLM's --host), as pinned."""
        return str(self.value("host"))

    @property
    def api_host(self) -> str:
        """Where the head's API is reached from the head itself: its --host, loopback for every interface."""
        host = self.api_listen
        return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)

    @property
    def master_port(self) -> int | None:
        """The rendezvous port on the head, as pinned; None on one node (no rendezvous)."""
        try:
            return int(self.value("master_port"))
        except KeyError:
            return None

    @property
    def prefix_caching(self) -> bool:
        """True when the plan turns prefix caching on."""
        return bool(self.value("enable_prefix_caching"))

    @property
    def digest(self) -> str:
        """A short hash of the rendered commands: equal plans, equal digests."""
        data = [[n.name, n.argv, n.env, n.secrets] for n in self.nodes]
        return sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def build_plan(spec: Spec, facts: ModelFacts, catalog: Catalog, sharing: Sharing | None = None) -> Plan:
    """Decide every setting and render every node's command; PlanProblems lists what is wrong.

    `sharing`: the deployments on each node and the model's weights (memory is divided by them)."""
    _plannable(spec)
    problems = [*facts.problems, *check_serve_keys(spec, catalog)]
    refused = _check_serve_values(spec, catalog, problems)
    # A rule reading a refused value is skipped: each value is reported once, where refused.
    inputs = Inputs(
        spec,
        catalog,
        facts,
        parse(spec.vllm.version),
        refused=frozenset(refused),
        sharing=sharing or Sharing(),
    )
    problems += removed_inputs(spec, inputs)
    derived, args, owned, notes, warnings = _apply_rules(inputs, problems)
    notes[:0] = facts.notes
    args += _served_name(spec, catalog)
    for key, value in spec.serve.items():
        option = catalog.get(key)
        if key in owned or key in refused or _not_rendered(key) or option is None:
            continue
        try:
            args += option_args(option, value)
        except BadValue as exc:
            problems.append(Problem(("serve", key), str(exc), exc.hint))
        if option.deprecated:
            notes.append(f"serve.{key}: {option.deprecated}")
    problems += unasked_code_or_files(spec, catalog, args)
    if problems:
        raise PlanProblems(problems)
    notes += _container_notes(spec)
    return Plan(
        spec.name,
        spec.vllm.version,
        catalog.version,
        spec.vllm.runtime,
        render_nodes(spec, args),
        (*model_rows(facts, inputs.runner_type, catalog, runner_set(spec)), *topology_rows(spec), *derived),
        tuple(notes),
        tuple(warnings),
    )


def unasked_code_or_files(spec: Spec, catalog: Catalog, args: list[str]) -> list[Problem]:
    """An option that loads code or opens files (CODE_OR_FILES) in the rendered argv though the
    spec does not set it: never rendered. Only a catalog mapping a rule's setting to such a flag,
    or a rule rendering one, could do it; the plan refuses rather than run it on every node."""
    flags = {
        flag: key
        for key in CODE_OR_FILES
        if (option := catalog.get(key)) is not None
        for flag in (*option.flags, *option.negative)
    }
    unasked = {flags[w.split("=", 1)[0]] for w in args if w.split("=", 1)[0] in flags}
    return [
        Problem(
            ("serve", key),
            f"would be on every node's command line ({catalog.options[key].flag}) though the spec "
            "does not set it: it loads code or opens files there",
            f"the flag catalog {catalog.source or 'of vLLM ' + catalog.version} maps a setting to it; "
            "set the key in serve: yourself if you mean it",
        )
        for key in sorted(unasked)
        if key not in spec.serve
    ]


def removed_inputs(spec: Spec, inputs: Inputs) -> list[Problem]:
    """Engine variables and speculative-config keys the spec's release removed and refuses."""
    problems = env_problems(spec.env, inputs.version, spec.vllm.version)
    config = spec.serve.get("speculative_config")
    if isinstance(config, dict):
        problems += speculative_problems(config, inputs.version, spec.vllm.version)
    return problems


def _plannable(spec: Spec) -> None:
    """What planning itself needs (the spec checks report the same): nodes, a release number."""
    problems = [] if spec.nodes else [NO_NODES]
    version = release_problem(("vllm", "version"), spec.vllm.version)
    problems += [version] if version else []
    if problems:
        raise PlanProblems(problems)


def _not_rendered(key: str) -> bool:
    return key in LAUNCHER_ONLY or key in SPEC_OWNED or key in SECRET_OPTIONS


def _check_serve_values(spec: Spec, catalog: Catalog, problems: list[Problem]) -> set[str]:
    """Every serve value against its option's type and range; the keys refused."""
    refused = set()
    for key, value in spec.serve.items():
        option = catalog.get(key)
        if option is None or _not_rendered(key):
            continue
        try:
            # A rule that renders the key says itself why a value is not a choice, with more context.
            check_value(option, value, choices=key not in RULE_OWNED)
        except BadValue as exc:
            problems.append(Problem(("serve", key), str(exc), exc.hint))
            refused.add(key)
    return refused


def _apply_rules(
    inputs: Inputs, problems: list[Problem]
) -> tuple[list[Derived], list[str], set[str], list[str], list[str]]:
    derived: list[Derived] = []
    args: list[str] = []
    owned: set[str] = set()
    notes: list[str] = []
    warnings: list[str] = []
    for rule in RULES:
        try:
            if not rule.applies(inputs):
                continue
            owned.update(rule.owns)
            decision = rule.decide(inputs)
        except RuleProblem as exc:
            problems.append(exc.problem)
            continue
        except Unresolved:  # it reads what was refused earlier; that problem is reported already
            continue
        args += decision.args
        flag = " ".join(decision.args) or None
        written = any(inputs.spec.serve.get(k) is not None for k in rule.owns)
        source = decision.source or ("spec" if written else rule.source)
        reason = f"{rule.reason} [{rule.mirrors}]"
        derived.append(Derived(rule.setting, decision.value, flag, reason, source, decision.note))
        if decision.note:
            notes.append(decision.note)
        if decision.warning:
            warnings.append(decision.warning)
    return derived, args, owned, notes, warnings


def check_serve_keys(spec: Spec, catalog: Catalog) -> list[Problem]:
    """serve keys that are not flags of this release, or that the spec must not set."""
    problems = []
    for key in spec.serve:
        where = ("serve", key)
        if key in LAUNCHER_ONLY:
            problems.append(
                Problem(
                    where,
                    "is set by spark-launch for each node",
                    "remove it; the plan shows the value each node gets",
                )
            )
        elif key in SPEC_OWNED:
            problems.append(Problem(where, f"comes from {SPEC_OWNED[key]}", f"set {SPEC_OWNED[key]} instead"))
        elif key in SECRET_OPTIONS:
            problems.append(
                Problem(
                    where,
                    "is a secret and would show on the command line",
                    f"list {SECRET_OPTIONS[key]} under secrets: and export it where you run spark-launch",
                )
            )
        elif key == "master_port" and len(spec.nodes) == 1:
            problems.append(
                Problem(where, "a one-node deployment has no rendezvous", "remove it: vLLM runs on one node")
            )
        elif catalog.get(key) is None:
            problems.append(
                Problem(
                    where,
                    f"is not a `vllm serve` option in vLLM {catalog.version}",
                    suggest(key, catalog.options) or "see `vllm serve --help=all`",
                    cause=True,
                )
            )
    return problems


def _served_name(spec: Spec, catalog: Catalog) -> list[str]:
    name = spec.model.served_name
    return [catalog.options["served_model_name"].flag, name] if name else []


def _container_notes(spec: Spec) -> list[str]:
    changed = changed_from_defaults(spec.vllm.container) if spec.vllm.runtime == "docker" else []
    if not changed:
        return []
    return [
        f"vllm.container changes what a DGX Spark needs ({', '.join(changed)}): "
        "right only for machines that differ, as the spec should say"
    ]
