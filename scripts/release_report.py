"""The release machine's report: what changed between two vLLM releases, and what covers each. Pure.

`make release VERSION=X` (scripts/release.py) resolves the conformance tier's commands with X
and with the newest supported release before it, reads both catalogs and both releases' APIs
(scripts/release_apis.py), and hands them here. Every change found is one line with an id:

    value PART.FIELD          a value every release has, derived differently
    field added|removed PART.FIELD
    flag added|removed|deprecated|changed DEST
    env added|removed|refused NAME
    speculative key added|removed KEY
    api gone|new DOTTED.NAME  an API the node scripts use

The review file next to the catalog (launcher/catalogs/review-X.json) covers changes, by
id or by a shell-style pattern: a rule of the rules table (or an input refused by
launcher/core/rules/removed.py), a row `check` compares, a change in the node scripts
(probe), or "no effect" on the nodes' agreement, each with its reason. A change no entry
covers fails the machine, and so does an entry that names a rule or row that does not exist.
"""

from __future__ import annotations

import fnmatch
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.core.checks.probe_rows import AGREE, HASH_ITEM
from launcher.core.rules.base import in_range
from launcher.core.rules.removed import ENV, SPECULATIVE_KEYS
from launcher.core.rules.table import RULES
from launcher.core.spec.versions import parse

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("rule", "check", "probe", "no effect")
# Fields whose value is new in every process (a random id): never compared.
VOLATILE = {"instance_id": "a random id per engine (vllm/config/vllm.py, VllmConfig.instance_id)"}
SHOWN_PAIRS = 3
SHOWN_JOBS = 3
NODE_SCRIPTS = ("probe.py", "learn_catalog.py", "traits.py")


@dataclass(frozen=True)
class Change:
    """One difference between the two releases: its id, and what was seen."""

    id: str
    detail: str


@dataclass
class Report:
    """Every change, what covers each, and what is wrong with the review."""

    release: str
    baseline: str
    commands: int
    changes: list[Change]
    covered: dict[str, dict[str, str]] = field(default_factory=dict)
    unseen: list[dict[str, str]] = field(default_factory=list)  # entries that match no change here
    problems: list[str] = field(default_factory=list)  # entries that do not hold, changes not covered
    models: list[str] = field(default_factory=list)  # the model registry's changes (the catalog's data)

    @property
    def ok(self) -> bool:
        """True when every change is covered and every entry holds."""
        return not self.problems


def value_changes(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]], roots: Iterable[str]
) -> tuple[list[Change], int]:
    """The fields of the resolved configs that differ, over the commands both releases resolved;
    and how many commands that is. `old`/`new`: probe results by command key; `roots`: paths
    that differ from run to run (the models' directory), shown as <models>."""
    seen: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    where: dict[tuple[str, tuple[str, str]], list[str]] = defaultdict(list)
    compared = 0
    for key in sorted(set(old) & set(new), key=lambda k: (not k.startswith("plan/"), k)):  # plans first
        a, b = _dump(old[key]), _dump(new[key])
        if a is None or b is None:
            continue
        compared += 1
        for name in sorted((set(a) | set(b)) - set(VOLATILE)):
            pair = (_plain(a.get(name), roots), _plain(b.get(name), roots))
            if pair[0] != pair[1]:
                seen[name][pair] += 1
                where[(name, pair)].append(key)
    changes = []
    for name, pairs in sorted(seen.items()):
        olds, news = {p[0] for p in pairs}, {p[1] for p in pairs}
        kind = "field added" if olds == {None} else "field removed" if news == {None} else "value"
        shown = [
            f"{_text(o)} -> {_text(n)} in {count} of {compared} "
            f"({', '.join(where[(name, (o, n))][:SHOWN_JOBS])}"
            f"{', ...' if len(where[(name, (o, n))]) > SHOWN_JOBS else ''})"
            for (o, n), count in sorted(pairs.items(), key=lambda x: (-x[1], x[0][0] or "", x[0][1] or ""))
        ]
        more = f"; {len(shown) - SHOWN_PAIRS} more pairs" if len(shown) > SHOWN_PAIRS else ""
        changes.append(Change(f"{kind} {name}", "; ".join(shown[:SHOWN_PAIRS]) + more))
    return changes, compared


def _dump(result: Mapping[str, Any]) -> dict[str, str] | None:
    if not result.get("ok"):
        return None
    dump: dict[str, str] | None = (result.get("resolved") or {}).get("config_dump")
    return dump


def _plain(value: str | None, roots: Iterable[str]) -> str | None:
    if value is None:
        return None
    for root in roots:
        value = value.replace(root, "<models>")
    return value


def _text(value: str | None) -> str:
    return "(absent)" if value is None else value if len(value) <= 80 else value[:77] + "..."


def flag_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Options added, removed, newly deprecated, or changed (kind, type, choices, bounds, forms)."""
    a, b = old["options"], new["options"]
    changes = [Change(f"flag added {d}", ", ".join(b[d]["flags"])) for d in sorted(set(b) - set(a))]
    changes += [Change(f"flag removed {d}", ", ".join(a[d]["flags"])) for d in sorted(set(a) - set(b))]
    for dest in sorted(set(a) & set(b)):
        was, now = a[dest], b[dest]
        if now.get("deprecated") and not was.get("deprecated"):
            changes.append(Change(f"flag deprecated {dest}", str(now["deprecated"])))
        moved = sorted(k for k in set(was) | set(now) if k != "deprecated" and was.get(k) != now.get(k))
        if moved:
            changes.append(
                Change(f"flag changed {dest}", "; ".join(_moved(k, was.get(k), now.get(k)) for k in moved))
            )
    return changes


def _moved(key: str, was: Any, now: Any) -> str:
    if isinstance(was, list) and isinstance(now, list):
        added, gone = (
            sorted(set(map(str, now)) - set(map(str, was))),
            sorted(set(map(str, was)) - set(map(str, now))),
        )
        parts = [f"+{', '.join(added)}" if added else "", f"-{', '.join(gone)}" if gone else ""]
        return f"{key}: {' '.join(p for p in parts if p)}"
    return f"{key}: {json.dumps(was, sort_keys=True)} -> {json.dumps(now, sort_keys=True)}"


def model_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What the catalogs' model sections say changed (data the plan reads; listed, not reviewed)."""
    a, b = old["models"], new["models"]
    archs_a, archs_b = a.get("architectures", {}), b.get("architectures", {})
    out = []
    for word, names in (("added", set(archs_b) - set(archs_a)), ("removed", set(archs_a) - set(archs_b))):
        if names:
            out.append(f"architectures {word} ({len(names)}): {', '.join(sorted(names))}")
    traits = sorted(n for n in set(archs_a) & set(archs_b) if archs_a[n] != archs_b[n])
    if traits:
        out.append(f"architectures whose traits changed ({len(traits)}): {', '.join(traits)}")
    for key in ("mla_model_types", "stand_ins"):
        if a.get(key) != b.get(key):
            out.append(f"{key}: {a.get(key)} -> {b.get(key)}")
    for key in ("methods", "mtp"):
        was, now = set(a.get("speculative", {}).get(key, [])), set(b.get("speculative", {}).get(key, []))
        if was != now:
            out.append(f"speculative {key}: +{sorted(now - was)} -{sorted(was - now)}")
    return out


def api_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """APIs of the node scripts that one release has and the other lacks; the engine's variables
    and the speculative config's keys added, removed, refused."""
    changes = []
    for name, info in sorted(new["apis"].items()):
        was = old["apis"].get(name, {}).get("present", False)
        if was != info["present"]:
            changes.append(Change(f"api {'new' if info['present'] else 'gone'} {name}", info["used_by"]))
    for word, field_name in (("env", "env"), ("speculative key", "speculative_keys")):
        was, now = set(old[field_name]), set(new[field_name])
        changes += [Change(f"{word} added {n}", "") for n in sorted(now - was)]
        changes += [Change(f"{word} removed {n}", "") for n in sorted(was - now)]
    changes += [
        Change(f"env refused {n}", "") for n in sorted(set(new["env_removed"]) - set(old["env_removed"]))
    ]
    return changes


def review(report: Report, entries: list[dict[str, str]]) -> Report:
    """Cover each change by the first entry that matches it; say what does not hold."""
    report.problems += [p for e in entries for p in _entry_problems(e, report.release)]
    used = set()
    for change in report.changes:
        entry = next((e for e in entries if fnmatch.fnmatchcase(change.id, e.get("change", ""))), None)
        if entry is None:
            report.problems.append(f"not covered: {change.id} ({change.detail or 'no detail'})")
            continue
        report.covered[change.id] = entry
        used.add(id(entry))
    report.unseen = [e for e in entries if id(e) not in used]
    return report


def _entry_problems(entry: Mapping[str, str], release: str) -> list[str]:
    """Why an entry of the review does not hold (an empty list when it does)."""
    what = entry.get("change") or "(no change)"
    kind, by, why = entry.get("as"), entry.get("by", ""), entry.get("why", "").strip()
    if kind not in KINDS:
        return [f"entry {what}: 'as' must be one of {', '.join(KINDS)}, not {kind!r}"]
    if not why:
        return [f"entry {what}: says no reason ('why')"]
    if kind == "rule":
        rules = {r.setting for r in RULES if in_range(parse(release), r.versions)}
        removed = {e.name for e in (*ENV, *SPECULATIVE_KEYS) if in_range(parse(release), e.versions)}
        if by not in rules | removed:
            return [f"entry {what}: no rule for {release} decides {by!r} (rules table, rules/removed.py)"]
    if kind == "check" and by not in {*AGREE, HASH_ITEM, "env"}:
        return [f"entry {what}: `check` compares no {by!r} (probe_rows.AGREE, {HASH_ITEM!r}, env)"]
    if kind == "probe":
        scripts = ROOT / "launcher" / "node" / "scripts"
        if not by or not any(by in (scripts / name).read_text() for name in NODE_SCRIPTS):
            return [f"entry {what}: the node scripts ({', '.join(NODE_SCRIPTS)}) have no {by!r}"]
    return []


def render(report: Report) -> str:
    """The report as Markdown: the same inputs give the same text (it is committed and tested)."""
    lines = [
        f"# vLLM {report.baseline} -> {report.release}: what the release machine found",
        "",
        f"Written by `make release VERSION={report.release}` (scripts/release.py); do not edit by hand.",
        f"{report.commands} commands (the conformance tier's: every case's planned command on each node, "
        "the command without what the plan pinned, the refusals' checks) resolved by both releases on "
        "vLLM's CPU platform, every field of the config compared; both catalogs; the APIs the node "
        "scripts use. On the CPU platform async scheduling is always off and the extensible KV cache "
        "unsupported: what only a Spark's CUDA platform derives is reviewed from the source (the "
        "entries that match no change here).",
        "",
        f"Verdict: {'every change is covered' if report.ok else f'{len(report.problems)} problem(s)'}.",
        "",
    ]
    if report.problems:
        lines += ["## Problems", "", *(f"- {p}" for p in report.problems), ""]
    lines += ["## Changes and what covers each", ""]
    for change in report.changes:
        entry = report.covered.get(change.id)
        lines.append(f"- `{change.id}`" + (f": {change.detail}" if change.detail else ""))
        if entry is not None:
            lines.append(f"  - {entry['as']}{' ' + entry['by'] if entry.get('by') else ''}: {entry['why']}")
        else:
            lines.append("  - NOT COVERED")
    if report.unseen:
        lines += ["", "## Reviewed, no change seen on this machine", ""]
        for entry in report.unseen:
            by = f" {entry['by']}" if entry.get("by") else ""
            lines.append(f"- `{entry['change']}`: {entry['as']}{by}: {entry['why']}")
    if report.models:
        lines += ["", "## The model registry (the catalog's data: the plan reads it as it is)", ""]
        lines += [f"- {m}" for m in report.models]
    return "\n".join(lines) + "\n"


def build(
    release: str,
    baseline: str,
    results: Mapping[str, Mapping[str, Mapping[str, Any]]],
    catalogs: Mapping[str, Mapping[str, Any]],
    apis: Mapping[str, Mapping[str, Any]],
    roots: Iterable[str],
    entries: list[dict[str, str]],
) -> Report:
    """The report of `release` against `baseline`, from each one's probe results (by command key),
    catalog and APIs, reviewed against the entries."""
    values, compared = value_changes(results[baseline], results[release], list(roots))
    changes = values + flag_changes(catalogs[baseline], catalogs[release])
    changes += api_changes(apis[baseline], apis[release])
    report = Report(release, baseline, compared, changes)
    report.models = model_changes(catalogs[baseline], catalogs[release])
    return review(report, entries)


def review_file(release: str) -> Path:
    """Where a release's review entries are kept: next to its catalog."""
    return ROOT / "launcher" / "catalogs" / f"review-{release}.json"


def report_file(release: str) -> Path:
    """Where a release's report is committed: next to its catalog."""
    return ROOT / "launcher" / "catalogs" / f"report-{release}.md"


def read_entries(release: str) -> list[dict[str, str]]:
    """The review entries for `release` (none when there is no file yet)."""
    path = review_file(release)
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    entries: list[dict[str, str]] = data["entries"]
    return entries
