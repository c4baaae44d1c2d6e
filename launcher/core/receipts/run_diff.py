"""What changed between two runs (or a run and the nodes now), item by item. Pure.

Both sides are receipts or snapshots (`content`): the plan, then per node its argv words,
its variables, the vLLM build or image, the model's files by name, and the host facts. A
side without the nodes' facts (a run whose check was skipped) compares only what it has.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ABSENT = "(none)"


@dataclass(frozen=True, slots=True)
class Change:
    """One item that differs: where (None: the cluster), what, and its value on each side."""

    node: str | None
    area: str  # plan, argv, env, vllm, image, model, host
    item: str
    before: str | None  # None: absent on that side
    after: str | None

    def as_dict(self) -> dict[str, Any]:
        """For `diff --json`."""
        return asdict(self)


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    """Every item that differs from `a` to `b`, the plan first, then node by node."""
    changes = _mapping(None, "plan", a.get("plan", {}), b.get("plan", {}))
    nodes_a, nodes_b = a.get("nodes", {}), b.get("nodes", {})
    for name in [*nodes_a, *(n for n in nodes_b if n not in nodes_a)]:
        if name not in nodes_a or name not in nodes_b:
            which = "after" if name in nodes_b else "before"
            changes.append(
                Change(
                    name,
                    "node",
                    "in the cluster",
                    "no" if which == "after" else "yes",
                    "yes" if which == "after" else "no",
                )
            )
            continue
        changes += node_diff(name, nodes_a[name], nodes_b[name])
    return changes


def node_diff(name: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    """One node's changes: argv words, variables, build or image, model files, host facts."""
    changes = argv_diff(name, a.get("argv", []), b.get("argv", []))
    changes += _mapping(name, "env", a.get("env", {}), b.get("env", {}))
    if "vllm" in a and "vllm" in b:
        area = "image" if "image_id" in a["vllm"] or "image_id" in b["vllm"] else "vllm"
        changes += _mapping(name, area, a["vllm"], b["vllm"])
    if "models" in a and "models" in b:
        changes += _models(name, a["models"], b["models"])
    if "host" in a and "host" in b:
        changes += _mapping(name, "host", a["host"], b["host"])
    return changes


def argv_diff(name: str, a: Sequence[str], b: Sequence[str]) -> list[Change]:
    """The argv words removed, added or replaced, with their position in `a`."""
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False).get_opcodes():
        if op != "equal":
            before, after = " ".join(a[i1:i2]) or None, " ".join(b[j1:j2]) or None
            out.append(Change(name, "argv", f"word {i1 + 1}", before, after))
    return out


def _models(name: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    out = []
    for label in sorted(set(a) | set(b)):
        ma, mb = a.get(label, {}), b.get(label, {})
        if ma.get("digest") == mb.get("digest") and ma.get("path") == mb.get("path"):
            continue
        if ma.get("path") != mb.get("path"):
            out.append(Change(name, "model", f"{label} path", ma.get("path"), mb.get("path")))
        files_a, files_b = ma.get("files", {}), mb.get("files", {})
        for rel in sorted(set(files_a) | set(files_b)):
            if files_a.get(rel) != files_b.get(rel):
                out.append(
                    Change(
                        name,
                        "model",
                        f"{label} file {rel}",
                        _short(files_a.get(rel)),
                        _short(files_b.get(rel)),
                    )
                )
    return out


def _mapping(node: str | None, area: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    """Every key whose value differs (a key missing on one side counts)."""
    out = []
    for key in [*a, *(k for k in b if k not in a)]:
        if a.get(key) != b.get(key):
            out.append(Change(node, area, key, _text(a.get(key)), _text(b.get(key))))
    return out


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "[]"
    return str(value)


def _short(digest: str | None) -> str | None:
    return f"sha256 {digest[:12]}" if digest else None


def grouped(changes: Sequence[Change], nodes: Sequence[str]) -> list[tuple[str, Change]]:
    """Changes with those identical on every node said once, as 'every node'; in order."""
    out: list[tuple[str, Change]] = []
    done: set[tuple[str, str, str | None, str | None]] = set()
    for change in changes:
        key = (change.area, change.item, change.before, change.after)
        if change.node is None:
            out.append(("cluster", change))
            continue
        on = {c.node for c in changes if (c.area, c.item, c.before, c.after) == key}
        if len(nodes) > 1 and on >= set(nodes):
            if key not in done:
                done.add(key)
                out.append(("every node", change))
        else:
            out.append((change.node, change))
    return out


def diff_text(title: str, changes: Sequence[Change], nodes: Sequence[str]) -> str:
    """`diff` for people: one line per change, those shared by every node said once."""
    if not changes:
        return f"{title}\n  no differences"
    lines = [title]
    for where, c in grouped(changes, nodes):
        said = words(c) if c.area == "argv" else f"{c.item}: {c.before or ABSENT} -> {c.after or ABSENT}"
        lines.append(f"  {where:<12} {c.area:<6} {said}")
    return "\n".join(lines)


def words(c: Change) -> str:
    """An argv change as a diff says it: `- removed`, `+ added`, or `old -> new`."""
    if c.before and not c.after:
        return f"- {c.before}"
    if c.after and not c.before:
        return f"+ {c.after}"
    return f"{c.before} -> {c.after}"
