"""The machinery of derived settings: what a rule sees, decides and declares. Pure.

A rule names one setting vLLM would derive on each node by itself, the releases it applies
to, a pure function deciding the value and the argv pinning it, the reason shown to the
user and the vLLM source it mirrors. The table of rules is `table.RULES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from launcher.core.spec.sections import Spec
from launcher.core.spec.versions import Version, parse, public
from launcher.core.vllm.catalog import Catalog, Option
from launcher.core.vllm.models import ModelFacts
from launcher.errors import Problem


class RuleProblem(Exception):
    """A spec value a rule cannot accept; carries the Problem to report."""

    def __init__(self, key: str | tuple[str, ...], message: str, hint: str | None = None) -> None:
        super().__init__(message)
        path = key if isinstance(key, tuple) else ("serve", key)
        self.problem = Problem(path, message, hint)


class Unresolved(Exception):
    """A rule needs what an earlier rule or the spec checks refused: that problem is reported already."""


class Resolved(dict[str, Any]):
    """The settings decided so far; reading one that is not (its rule refused the spec) skips the reader."""

    def __missing__(self, key: str) -> Any:
        raise Unresolved(key)


@dataclass(frozen=True, slots=True)
class Sharing:
    """What planning one deployment knows beside its spec: the deployments on each node (their
    memory is shared), and the size of the model's weights."""

    deployments: Mapping[str, int] = field(default_factory=dict)  # node -> deployments on it
    weight_bytes: int | None = None  # the model's weights on disk; None when not known


@dataclass
class Inputs:
    """What rules decide from: the spec, the catalog, the model, earlier decisions."""

    spec: Spec
    catalog: Catalog
    facts: ModelFacts
    version: Version
    resolved: dict[str, Any] = field(default_factory=Resolved)
    refused: frozenset[str] = frozenset()  # serve keys whose value its option's type refused
    sharing: Sharing = field(default_factory=Sharing)

    def decided(self, key: str) -> Any:
        """The value an earlier rule decided for `key`; Unresolved when it was refused."""
        return self.resolved[key]

    def explicit(self, key: str) -> Any:
        """The spec's own `serve` value for `key`, or None; Unresolved when that value was refused."""
        if key in self.refused:
            raise Unresolved(key)
        return self.spec.serve.get(key)

    @property
    def runner_type(self) -> str | None:
        """The runner vLLM resolves (ModelConfig._get_runner_type); None when the plan cannot tell."""
        runner = self.spec.serve.get("runner", "auto")
        if runner != "auto":
            return str(runner)
        if self.spec.serve.get("convert", "auto") not in ("auto", "none"):
            return "pooling"
        return None if self.facts.pooling is None else ("pooling" if self.facts.pooling else "generate")

    @property
    def pooling(self) -> bool | None:
        """True when vLLM runs the model as a pooling model (its defaults differ there); None: unknown."""
        runner = self.runner_type
        return None if runner is None else runner == "pooling"


@dataclass(frozen=True, slots=True)
class Decision:
    """A rule's outcome: the value, the argv pinning it (same on all nodes), a note; a warning
    (said by validate, plan and up); where the value came from, when the spec says it elsewhere
    than in serve (None: `serve`'s keys tell)."""

    value: Any
    args: tuple[str, ...] = ()
    note: str | None = None
    warning: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """One derived setting: where it applies, how it is decided, and why."""

    setting: str
    versions: str  # e.g. ">=0.29,<0.33"; empty means every release
    decide: Callable[[Inputs], Decision]
    reason: str
    mirrors: str
    owns: tuple[str, ...] = ()  # serve keys this rule renders itself
    when: Callable[[Inputs], bool] = lambda _: True
    # Where the value comes from when the spec sets none of `owns`: vLLM's own choice, pinned
    # ("vllm-default"), or the launcher's decision ("launcher"). Set by the spec, it is "spec".
    source: str = "vllm-default"

    def applies(self, inputs: Inputs) -> bool:
        """True when this rule is in force for the spec's vLLM release and model."""
        return in_range(inputs.version, self.versions) and self.when(inputs)


def in_range(version: Version, spec: str) -> bool:
    """True when `version` satisfies every clause of `spec` (">=0.29,<0.33"), by version order.

    Plain order, not PEP 440's specifier rules: those keep 0.33.0rc1 out of both `<0.33` and
    `>=0.33`, and a version must fall in exactly one of two complementary ranges. A local
    label (+cpu, +cu130) names a build, not a release: it is left out of the comparison.
    """
    release = public(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        op = clause.rstrip("0123456789.")
        bound = parse(clause[len(op) :])
        ok = {">=": release >= bound, "<": release < bound, "<=": release <= bound, ">": release > bound}[op]
        if not ok:
            return False
    return True


def bool_args(option: Option, value: bool) -> tuple[str, ...]:
    """The argv pinning a boolean option to `value`, in the form this release accepts."""
    if value:
        return (option.flag,)
    if option.negative:
        return (option.negative[0],)
    return ()


def pinned(inputs: Inputs, key: str, value: Any) -> Decision:
    """A Decision pinning option `key` to `value` as `--flag=value`."""
    return Decision(value, (f"{inputs.catalog.options[key].flag}={value}",))
