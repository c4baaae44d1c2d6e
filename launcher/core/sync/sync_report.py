"""What `sync models` found, planned and did, per node; as text for people and JSON for scripts. Pure."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from launcher.core.sync.model_manifest import human
from launcher.core.sync.transfer_plan import Transfer
from launcher.errors import ExitStatus

# A target's outcome. Dry run: identical, would copy, refused, unreachable. Run: identical,
# copied, refused, failed, unreachable.
OK_STATES = ("identical", "would copy", "copied")


@dataclass(frozen=True, slots=True)
class DirPlan:
    """One model directory on one target: what it lacks, and why it cannot be copied (if so)."""

    label: str
    path: str
    transfer: Transfer
    problems: tuple[str, ...] = ()
    prepare: bool = True  # the target must create the directory or remove files before the copy


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """One target: its state, each directory's plan, what was sent and how long it took."""

    node: str
    state: str
    dirs: tuple[DirPlan, ...] = ()
    detail: str = ""
    hint: str | None = None
    sent_bytes: int = 0
    copy_seconds: float = 0.0  # rsync's time, all directories together
    verify_seconds: float = 0.0  # the target's manifest after the copy
    proven_files: int = 0  # files whose sha256 the target took from rsync's proof of the copy
    hashed_bytes: int = 0  # what the target read again to verify (what rsync did not prove)
    unreachable: bool = False

    @property
    def ok(self) -> bool:
        """True when the node is (or would be made) identical to the source."""
        return self.state in OK_STATES


@dataclass(frozen=True, slots=True)
class SourceModel:
    """A model directory on the source: its size, its file count, the digest of its manifest."""

    label: str
    path: str
    files: int
    bytes: int
    digest: str
    hashed_bytes: int
    links: tuple[str, ...] = ()  # kept as links, each `path -> target`


@dataclass(frozen=True, slots=True)
class SyncResult:
    """Every target's outcome, against the source's model directories."""

    source: str
    dry_run: bool
    relay: bool
    models: tuple[SourceModel, ...]
    nodes: tuple[NodeOutcome, ...] = field(default_factory=tuple)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every target is identical to the source (or would be made so)."""
        return all(n.ok for n in self.nodes)

    @property
    def exit_status(self) -> ExitStatus:
        """OK; UNREACHABLE when a node (or a node from the source) could not be reached; else FAILURE."""
        if self.ok:
            return ExitStatus.OK
        return ExitStatus.UNREACHABLE if any(n.unreachable for n in self.nodes) else ExitStatus.FAILURE


def sync_text(result: SyncResult) -> str:
    """Per source model a line; per target its state and, for what is (or would be) copied, the numbers."""
    verb = "would send" if result.dry_run else "sent"
    lines = [
        f"source {result.source}: {m.label} {m.path}: {m.files} files, {human(m.bytes)}"
        f" (sha256 manifest {m.digest[:12]}; hashed now: {human(m.hashed_bytes)})"
        for m in result.models
    ]
    for m in result.models:
        if m.links:
            shown = ", ".join(m.links[:4]) + (f", ... ({len(m.links)} in all)" if len(m.links) > 4 else "")
            lines.append(f"  {m.label} links, copied as links: {shown}")
    for n in result.nodes:
        head = f"{n.node}: {n.state}"
        if n.state == "copied":
            rate = n.sent_bytes / n.copy_seconds if n.copy_seconds else 0
            head += (
                f": {human(n.sent_bytes)} in {n.copy_seconds:.1f} s ({human(rate)}/s), "
                f"verified in {n.verify_seconds:.1f} s ({n.proven_files} files by rsync's checksum of "
                f"the source's hashed bytes, {human(n.hashed_bytes)} hashed there)"
            )
        lines.append(head + (f": {n.detail}" if n.detail else ""))
        for d in n.dirs:
            lines += [f"    {line}" for line in _dir_lines(d, verb)]
        if n.hint:
            lines.append(f"    -> {n.hint}")
    if result.dry_run:
        lines.append("dry run: nothing was copied or removed")
    return "\n".join(lines)


def _dir_lines(d: DirPlan, verb: str) -> list[str]:
    t = d.transfer
    if not t.needed:
        return [f"{d.label} {d.path}: identical ({t.identical} files)"]
    out = [f"{d.label} {d.path}: {verb} {human(t.send_bytes)}; {t.identical} files already identical"]
    for what, names in (
        ("missing", t.missing),
        ("continue (shorter)", t.resume),
        ("replace (differs)", t.replace),
        ("remove (not on the source)", t.extra),
    ):
        if names:
            shown = ", ".join(names[:4]) + (f", ... ({len(names)} in all)" if len(names) > 4 else "")
            out.append(f"  {what}: {shown}")
    out += [f"  REFUSED: {p}" for p in d.problems]
    return out


def sync_json(result: SyncResult) -> str:
    """`sync models --json`."""
    data: dict[str, Any] = asdict(result)
    data["ok"] = result.ok
    for node, outcome in zip(data["nodes"], result.nodes, strict=True):
        node["ok"] = outcome.ok
        for d, plan in zip(node["dirs"], outcome.dirs, strict=True):
            d["transfer"]["send"] = list(plan.transfer.send)
            d["transfer"]["remove"] = list(plan.transfer.remove)
    return json.dumps(data, indent=2)
