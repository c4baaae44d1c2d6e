"""Rows of the model: present everywhere, complete, and the same files by content. Pure.

Each node reports a manifest of every model directory (each file's size and sha256, from
a cache beside the model for files that did not change). Nodes agree when the manifests
do; a file that differs anywhere is a row of its own, so a same-size shard with one byte
changed is a FAIL naming that shard.
"""

from __future__ import annotations

from collections.abc import Mapping

from launcher.core.answers.facts_answer import Facts
from launcher.core.checks.check_report import Row, each
from launcher.core.spec.sections import Spec
from launcher.core.sync.model_manifest import (
    CONFIG,
    REFUSED_HINT,
    Entry,
    LinkEntry,
    Manifest,
    differences,
    human,
    missing_parts,
    model_dirs,
    needs_weights,
    refusals,
)
from launcher.core.vllm.sources import Sources

SHOWN = 10  # differing files shown one per row; the rest are counted
FIX = "spark-launch sync models SPEC copies it from the head and verifies it"


def model_rows(spec: Spec, facts: Mapping[str, Facts]) -> list[Row]:
    """Per model directory (the model, a local draft model): exists, complete, identical files."""
    rows = []
    for label, path in model_dirs(spec):
        manifests = {n: f["models"][path] for n, f in facts.items()}
        rows += _directory_rows(label, path, manifests, needs_weights(spec))
    return rows


def _directory_rows(label: str, path: str, manifests: dict[str, Manifest], weights: bool) -> list[Row]:
    rows = [
        each(
            "model",
            f"{path} exists",
            {n: m.exists for n, m in manifests.items()},
            f"copy the {label} to {path} on every node: {FIX}",
        )
    ]
    if not all(m.exists for m in manifests.values()):
        return rows
    lacking = {n: missing_parts(m, weights) for n, m in manifests.items()}
    rows.append(
        Row(
            "model",
            f"{label} complete",
            {n: "yes" if not parts else "missing " + "; ".join(parts) for n, parts in lacking.items()},
            not any(lacking.values()),
            None if not any(lacking.values()) else f"config.json, a tokenizer and every indexed shard: {FIX}",
        )
    )
    refused = {n: refusals(m) for n, m in manifests.items()}
    if any(refused.values()):
        shown = {n: "; ".join(r) or "none" for n, r in refused.items()}
        rows.append(Row("model", f"{label}: links and special files", shown, False, REFUSED_HINT))
    diffs = differences(manifests)
    for rel, entries in list(diffs.items())[:SHOWN]:
        rows.append(
            Row(
                "model",
                rel,
                {n: _entry(e) for n, e in entries.items()},
                False,
                f"differs between nodes: {FIX}",
            )
        )
    if len(diffs) > SHOWN:
        rows.append(Row("model", f"... {len(diffs) - SHOWN} more files differ", {}, False, FIX))
    if not diffs:
        first = next(iter(manifests.values()))
        rows.append(
            Row(
                "model",
                f"{label} files ({len(first.files)}, {human(first.total_bytes)}, sha256)",
                {n: m.digest[:12] for n, m in manifests.items()},
                True,
            )
        )
        if first.links:  # named, as everything the link policy decides
            links = ", ".join(f"{rel} -> {t}" for rel, t in sorted(first.links.items())[:SHOWN])
            links += f" (and {len(first.links) - SHOWN} more)" if len(first.links) > SHOWN else ""
            rows.append(Row("model", f"{label} links kept as links", dict.fromkeys(manifests, links), True))
    return rows


def _entry(entry: Entry | None) -> str:
    if isinstance(entry, LinkEntry):
        return f"a link to {entry.target}"
    return "missing" if entry is None else f"{entry.sha256[:12]} {human(entry.size)}"


def planned_model_rows(sources: Sources | None, facts: Mapping[str, Facts]) -> list[Row]:
    """Every node's config.json is the one the plan was made from (read here, or on the head)."""
    if sources is None or sources.model.sha256 is None:
        return []
    files, planned = sources.model, sources.model.sha256[:12]
    where = "here" if files.node is None else f"on {files.node}" + (" earlier" if files.cached_at else "")
    values = {n: _config_sha(f["models"].get(files.path)) for n, f in facts.items()}
    ok = all(v in (planned, "(a link)") for v in values.values())  # a link: the manifest rows compare it
    if files.node is None:
        hint = (
            "the config.json here is not the nodes': the plan must be made from theirs (update or "
            f"remove the copy here, or copy it to the nodes: {FIX})"
        )
    else:
        hint = f"config.json changed on the nodes since it was read {where}: run the command again"
    item = f"config.json as planned (read {where}: {planned})"
    return [Row("model", item, values, ok, None if ok else hint)]


def _config_sha(manifest: Manifest | None) -> str:
    entry = manifest.files.get(CONFIG) if manifest is not None else None
    if entry is not None:
        return entry.sha256[:12]
    return "(a link)" if manifest is not None and CONFIG in manifest.links else "missing"
