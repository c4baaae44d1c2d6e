"""What moving the cluster to another vLLM release would change: the upgrade preview. Pure.

The spec is planned for both releases, each with its own committed catalog and the rules'
version ranges: the flags it uses that the other release removed or deprecated, the derived
settings that change (a default the spec leaves to the release, or a value the spec sets
whose pinning changes), each node's argv, the new notes, and what the other release refuses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from launcher.core.plan import Plan, PlanProblems, build_plan
from launcher.core.receipts.run_diff import Change, argv_diff, grouped, words
from launcher.core.rows import Derived
from launcher.core.rules.base import Sharing
from launcher.core.spec.sections import Spec
from launcher.core.vllm.catalog import Catalog, Option
from launcher.core.vllm.models import ModelFacts


@dataclass(frozen=True, slots=True)
class Moved:
    """One thing that changes: its kind, what, and how it is before and after."""

    kind: str  # removed, deprecated, default, derived, argv, note, refused
    item: str
    before: str | None
    after: str | None
    node: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """For `plan --compare-release --json`."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Comparison:
    """The preview: both releases, both plan digests (None: refused), and every change."""

    cluster: str
    before: str
    after: str
    digests: tuple[str, str | None]
    changes: tuple[Moved, ...]
    nodes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """For `--json`."""
        return {
            "cluster": self.cluster,
            "from": self.before,
            "to": self.after,
            "plans": list(self.digests),
            "changes": [c.as_dict() for c in self.changes],
        }


def compare_release(
    spec: Spec, plan: Plan, old: Catalog, new: Catalog, facts: ModelFacts, sharing: Sharing
) -> Comparison:
    """Plan `spec` for release `new` too, and say what differs from `plan` (made with `old`, and
    the same `sharing`: the nodes' memory is divided as it was)."""
    moved_spec = dataclasses.replace(
        spec, vllm=dataclasses.replace(spec.vllm, version=new.version, flags_from=None)
    )
    changes = _flags(spec, plan, old, new)
    try:
        other: Plan | None = build_plan(moved_spec, facts, new, sharing)
    except PlanProblems as exc:
        other = None
        changes += [
            Moved("refused", p.dotted, None, p.message + (f" ({p.hint})" if p.hint else ""))
            for p in exc.problems
        ]
    if other is not None:
        changes += _derived(spec, plan.derived, other.derived)
        changes += _argv(plan, other)
        changes += [Moved("note", n, None, n) for n in other.notes if n not in plan.notes]
    return Comparison(
        spec.name,
        plan.vllm_version,
        new.version,
        (plan.digest, other.digest if other else None),
        tuple(changes),
        tuple(n.name for n in plan.nodes),
    )


def _flags(spec: Spec, plan: Plan, old: Catalog, new: Catalog) -> list[Moved]:
    """The options the spec and the plan use that the new release removed or deprecated."""
    used = dict.fromkeys(spec.serve)
    by_flag = {f: key for key, o in old.options.items() for f in (*o.flags, *o.negative)}
    for word in plan.nodes[0].common_argv:
        key = by_flag.get(word.split("=", 1)[0])
        if key:
            used.setdefault(key)
    out = []
    for key in used:
        before, after = old.get(key), new.get(key)
        if before is None:
            continue
        whence = f"serve.{key}" if key in spec.serve else "pinned by the plan"
        item = f"{before.flag} ({whence})"
        if after is None:
            out.append(Moved("removed", item, _state(before), "not an option"))
        elif after.deprecated and not before.deprecated:
            out.append(Moved("deprecated", item, _state(before), after.deprecated))
        elif after.choices != before.choices and after.choices is not None:
            out.append(Moved("choices", item, _choices(before), _choices(after)))
    return out


def _derived(spec: Spec, before: Sequence[Derived], after: Sequence[Derived]) -> list[Moved]:
    """Derived settings whose value or pinning flag changes: a default, or one the spec sets."""
    old = {d.setting: d for d in before}
    new = {d.setting: d for d in after}
    out = []
    for setting in [*old, *(s for s in new if s not in old)]:
        a, b = old.get(setting), new.get(setting)
        if a and b and (a.value, a.flag) == (b.value, b.flag):
            continue
        kind = "derived" if setting in spec.serve else "default"
        out.append(Moved(kind, setting, _setting(a), _setting(b)))
    return out


def _argv(before: Plan, after: Plan) -> list[Moved]:
    """Each node's command words that change (the same on every node said once)."""
    changes: list[Change] = []
    for a, b in zip(before.nodes, after.nodes, strict=True):
        changes += argv_diff(a.name, a.argv, b.argv)
    names = [n.name for n in before.nodes]
    return [Moved("argv", words(c), c.before, c.after, where) for where, c in grouped(changes, names)]


def _setting(d: Derived | None) -> str | None:
    if d is None:
        return None
    value = ("on" if d.value else "off") if isinstance(d.value, bool) else str(d.value)
    return f"{value} ({d.flag or 'implied, no flag'})"


def _state(option: Option) -> str:
    return f"deprecated: {option.deprecated}" if option.deprecated else "live"


def _choices(option: Option) -> str:
    return ", ".join(option.choices or ()) or "any value"


TITLES = {
    "removed": "flags removed",
    "deprecated": "flags deprecated",
    "choices": "flags whose choices change",
    "derived": "derived settings that change (set in the spec)",
    "default": "defaults that change (left to the release: the plan pins its choice)",
    "argv": "commands",
    "note": "new notes",
    "refused": "refused by the new release (fix these before moving)",
}


def comparison_text(c: Comparison) -> str:
    """The preview for people: grouped by kind, each change with its before and after."""
    after = c.digests[1] or "refused"
    lines = [f"cluster {c.cluster}: vLLM {c.before} -> {c.after} (plan {c.digests[0]} -> {after})"]
    if not c.changes:
        return "\n".join([*lines, "  nothing changes"])
    for kind, title in TITLES.items():
        found = [m for m in c.changes if m.kind == kind]
        if found:
            lines += ["", f"{title}:"]
            lines += [_line(m) for m in found]
    return "\n".join(lines)


def _line(m: Moved) -> str:
    if m.kind in ("note", "refused") and m.before is None:
        return f"  - {m.after}" if m.kind == "note" else f"  {m.item}: {m.after}"
    if m.kind == "argv":
        return f"  {m.node}: {m.item}"
    return f"  {m.item}: {m.before or '(none)'} -> {m.after or '(none)'}"
