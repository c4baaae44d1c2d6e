"""A model directory by content (each file's size and sha256), as one node reports it. Pure.

The node script `manifest` answers; `core.answers.sync.manifest` reads the answer strictly. Two nodes hold the
same model when their manifests are equal; `differences` names the files that are not.
sha256 because a model's weights on the Hugging Face Hub are LFS objects named by the
sha256 of their bytes (the manifest can be checked against the Hub), and because the
Sparks' Arm cores hash it in hardware.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any

from launcher.core.spec.sections import Spec
from launcher.core.vllm.models import WEIGHT_SUFFIXES

CONFIG = "config.json"
REFUSED_HINT = (
    "a link pointing outside the model directory, a device, a FIFO or a socket is neither read "
    "nor copied: put the file itself there (cp --remove-destination TARGET LINK), or remove it"
)
TOKENIZERS = ("tokenizer.json", "tokenizer.model", "vocab.json", "tekken.json", "spiece.model")


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file of a model: its size and the sha256 of its bytes."""

    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class LinkEntry:
    """A link inside a model directory, kept as a link: its target as written."""

    target: str


Entry = FileEntry | LinkEntry


@dataclass(frozen=True, slots=True)
class Room:
    """Where a copy would land on a node: free bytes, the allocation unit, what is not writable."""

    free: int
    block: int
    at: str  # the existing directory measured: the model's, or its nearest existing parent
    writable: bool
    unwritable: tuple[str, ...] = ()  # files and directories inside the model we cannot write


@dataclass(frozen=True, slots=True)
class Manifest:
    """A model directory on one node: every file by content, and the indexes' shard names."""

    path: str
    exists: bool
    files: Mapping[str, FileEntry] = field(default_factory=dict)
    indexes: Mapping[str, tuple[str, ...] | None] = field(default_factory=dict)
    unreadable: tuple[str, ...] = ()
    hashed_bytes: int = 0  # bytes hashed for this answer; the rest came from the cache
    adopted: int = 0  # files recorded from a copy's proof (rsync's), not hashed again
    room: Room | None = None
    mtimes: Mapping[str, int] = field(default_factory=dict)  # whole seconds; not part of identity
    links: Mapping[str, str] = field(default_factory=dict)  # kept as links: path -> target
    refused: Mapping[str, str] = field(default_factory=dict)  # neither read nor copied: path -> why
    snapshot: bool = False  # a Hugging Face cache snapshot: its files are links into its blobs

    @property
    def total_bytes(self) -> int:
        """The size of every file together."""
        return sum(f.size for f in self.files.values())

    @property
    def entries(self) -> dict[str, Entry]:
        """Everything the model is made of: files by content, links by target."""
        return {**self.files, **{rel: LinkEntry(t) for rel, t in self.links.items()}}

    @property
    def digest(self) -> str:
        """One hash of the whole manifest: equal digests, identical directories."""
        body: Any = {k: [v.size, v.sha256] for k, v in sorted(self.files.items())}
        if self.links:  # without links, the digest a manifest of files alone always had
            body = {"files": body, "links": dict(sorted(self.links.items()))}
        return sha256(json.dumps(body).encode()).hexdigest()


def model_dirs(spec: Spec) -> list[tuple[str, str]]:
    """(label, path) of every model directory the nodes need: the model, and a local draft model."""
    dirs = [("model", spec.model.path)]
    speculative = spec.serve.get("speculative_config")
    draft = speculative.get("model") if isinstance(speculative, dict) else None
    if isinstance(draft, str) and draft.startswith("/") and draft != spec.model.path:
        dirs.append(("draft model", draft))
    return dirs


def needs_weights(spec: Spec) -> bool:
    """False when vLLM makes up the weights (load_format: dummy): config and tokenizer suffice."""
    return spec.serve.get("load_format") != "dummy"


def missing_parts(m: Manifest, weights: bool = True) -> list[str]:
    """What a complete model directory must hold and this one lacks (empty: complete).

    A link kept as a link counts as what it is named: vLLM reads through it.
    """
    if not m.exists:
        return [f"the directory {m.path}"]
    present = m.entries
    missing = [] if CONFIG in present else [CONFIG]
    if not any(t in present for t in TOKENIZERS):
        missing.append(f"a tokenizer ({', '.join(TOKENIZERS[:3])}, ...)")
    for index, shards in sorted(m.indexes.items()):
        if shards is None:
            missing.append(f"a readable weight_map in {index}")
            continue
        missing += [f"{s} (named in {index})" for s in shards if s not in present]
    if weights and not any(rel.endswith(WEIGHT_SUFFIXES) for rel in present):
        missing.append(f"weights ({', '.join('*' + s for s in WEIGHT_SUFFIXES[:2])}, ...)")
    return missing + [f"{rel} (unreadable)" for rel in m.unreadable]


def refusals(m: Manifest) -> list[str]:
    """What the link policy refuses in this directory, each with why (empty: nothing)."""
    return [f"{rel}: {why}" for rel, why in sorted(m.refused.items())]


def differences(manifests: Mapping[str, Manifest]) -> dict[str, dict[str, Entry | None]]:
    """Every file or link not identical on all nodes: {path: {node: its entry, or None where missing}}."""
    every = {node: m.entries for node, m in manifests.items()}
    names = sorted({rel for entries in every.values() for rel in entries})
    out = {}
    for rel in names:
        entries = {node: found.get(rel) for node, found in every.items()}
        if len(set(entries.values())) > 1:
            out[rel] = entries
    return out


def human(size: float) -> str:
    """A byte count for people: 1.5 GB, 320 MB, 12 kB (powers of 1000, as disks are sold)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(size) < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
