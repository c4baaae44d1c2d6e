"""The answers of `sync models`' scripts: manifests, hashing progress, reach, prepare, transfer. Pure.

A manifest names files a sync will copy and delete: each name must be a path inside the
model directory, each size and hash well-formed, and the directory the one asked about.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.answers.read import MAX_BYTES, MAX_PATH, At, BadAnswer, Refused, strings
from launcher.core.answers.run_answer import EXIT, failed
from launcher.core.sync.model_manifest import FileEntry, Manifest, Room

MAX_FILES = 1_000_000
MAX_BLOCK = 1 << 30
MTIME = (-(1 << 40), 1 << 40)


def manifest(raw: object, path: str) -> Manifest:
    """The manifest script's answer for the model directory `path`; BadAnswer if it is not one."""
    at = At(raw)
    error = failed(at)
    if error is not None:
        raise Refused(f"cannot read the model directory {path}: {error}")
    said = at.field("path").absolute()
    if said != path:
        raise BadAnswer("path", f"the answer is about {said[:200]!r}, not {path!r}")
    files = {rel: _entry(entry) for rel, entry in _mapping(at, "files").items()}
    total = sum(f.size for f in files.values())
    if total > MAX_BYTES:
        raise BadAnswer("files", f"{total} bytes in all: no model is that large")
    return Manifest(
        path=path,
        exists=at.field("exists").flag(),
        files=files,
        indexes=_indexes(at),
        unreadable=at.maybe("unreadable", lambda a: strings(a, At.relative, MAX_FILES)) or (),
        hashed_bytes=at.maybe("hashed_bytes", At.integer) or 0,
        adopted=at.maybe("adopted", lambda a: a.integer(0, MAX_FILES)) or 0,
        room=at.maybe("room", _room),
        mtimes={rel: t.integer(*MTIME) for rel, t in _mapping(at, "mtimes").items()},
        links={rel: t.name(MAX_PATH) for rel, t in _mapping(at, "links").items()},
        refused={rel: why.text() for rel, why in _mapping(at, "refused").items()},
        snapshot=at.maybe("snapshot", At.flag) or False,
    )


def _entry(at: At) -> FileEntry:
    pair = at.items(2)
    if len(pair) != 2:
        raise BadAnswer(at.where, "expected [size, sha256]")
    return FileEntry(pair[0].integer(0, MAX_BYTES), pair[1].hexdigest())


def _mapping(at: At, key: str) -> dict[str, At]:
    found = at.get(key)
    return found.entries(At.relative, MAX_FILES) if found is not None else {}


def _indexes(at: At) -> dict[str, tuple[str, ...] | None]:
    out: dict[str, tuple[str, ...] | None] = {}
    for index, shards in _mapping(at, "indexes").items():
        out[index] = None if shards.value is None else strings(shards, At.relative, MAX_FILES)
    return out


def _room(at: At) -> Room:
    return Room(
        free=at.field("free").integer(0, MAX_BYTES),
        block=at.field("block").integer(1, MAX_BLOCK),
        at=at.field("at").absolute(),
        writable=at.field("writable").flag(),
        unwritable=at.maybe("unwritable", lambda a: strings(a, At.relative, 10_000)) or (),
    )


@dataclass(frozen=True, slots=True)
class Hashing:
    """Hashing progress of a manifest: bytes done of the total."""

    done: int
    total: int


def manifest_event(raw: object) -> Hashing | None:
    """A progress line of the manifest script (None: the line is its answer)."""
    at = At(raw)
    kind = at.maybe("event", lambda a: a.one_of("hashing"))
    if kind is None:
        return None
    return Hashing(at.field("done").integer(), at.field("total").integer())


@dataclass(frozen=True, slots=True)
class Reach:
    """Whether the source's remote shell reaches a target: what failed, and what it said."""

    ok: bool
    rsh: str
    failed: str | None = None  # rsync (on the source), remote rsync (on the target), ssh
    error: str = ""

    @classmethod
    def parse(cls, raw: object) -> Reach:
        """From the transfer script's `reach` answer."""
        at = At(raw)
        error = failed(at)
        rsh = at.field("rsh").name(4096)
        if error is None:
            return cls(True, rsh)
        return cls(False, rsh, at.field("failed").one_of("rsync", "remote rsync", "ssh"), error)


def prepared(raw: object) -> str | None:
    """The prepare script's answer: None when the directory is ready, else why not."""
    at = At(raw)
    error = failed(at)
    errors = at.maybe("errors", lambda a: strings(a, At.text, 100)) or ()
    return error if error is None or not errors else "; ".join(errors)


@dataclass(frozen=True, slots=True)
class Progress:
    """rsync's progress on the source: bytes of the listed files done."""

    bytes: int


@dataclass(frozen=True, slots=True)
class RelayAsk:
    """The source's rsync asking the relay for its remote command on the target (its words)."""

    command: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Sent:
    """How the source's rsync ended."""

    ok: bool
    exit: int | None
    error: str
    seconds: float = 0.0
    verified: tuple[str, ...] = ()  # the files rsync proved sent whole, from bytes the manifest hashed


TransferEvent = Progress | RelayAsk | Sent


def transfer_event(raw: object) -> TransferEvent:
    """One JSON line of the transfer script's `send`."""
    at = At(raw)
    kind = at.maybe("event", lambda a: a.one_of("progress", "relay"))
    if kind == "progress":
        return Progress(at.field("bytes").integer())
    if kind == "relay":
        return RelayAsk(strings(at.field("command"), lambda a: a.name(4096), 64))
    return Sent(
        ok=at.field("ok").flag(),
        exit=at.maybe("exit", lambda a: a.integer(*EXIT)),
        error=at.maybe("error", At.text) or "",
        seconds=at.maybe("seconds", At.number) or 0.0,
        verified=at.maybe("verified", lambda a: strings(a, At.relative, MAX_FILES)) or (),
    )
