"""What one target lacks against the source, whether it has room for it, and the rsync that copies it. Pure.

A file the target lacks is sent; one it holds shorter is continued (rsync --append-verify
adds the rest, then checks the whole file, and sends it again if the start differed); one
of another content that is not shorter cannot be continued, so it is removed first and
sent again, as are files the source does not have. Files compare by size and sha256,
never by size and mtime: a same-size shard with one byte changed is found.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from launcher.core.sync.model_manifest import Entry, FileEntry, Manifest, Room, human

# The remote shell on the source when its environment sets no RSYNC_RSH: never prompt.
DEFAULT_RSH = "ssh -o BatchMode=yes -o ConnectTimeout=10"
IO_TIMEOUT = 300  # seconds without any data before rsync gives up
SENT_MARK = "SPARK_LAUNCH_SENT "  # rsync names each file it sent after this (the transfer script reads it)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One model directory, source to target: what is sent, continued, replaced, removed."""

    missing: tuple[str, ...] = ()
    resume: tuple[str, ...] = ()  # shorter on the target: continued from where it stopped
    replace: tuple[str, ...] = ()  # other content, not shorter: removed, then sent whole
    extra: tuple[str, ...] = ()  # not on the source: removed
    identical: int = 0
    send_bytes: int = 0  # what crosses the link
    list_bytes: int = 0  # full sizes of the files rsync is given (its progress counts these)
    need_bytes: int = 0  # disk the copy takes on the target, net of what is removed first

    @property
    def needed(self) -> bool:
        """True when the target differs from the source at all."""
        return bool(self.missing or self.resume or self.replace or self.extra)

    @property
    def send(self) -> tuple[str, ...]:
        """Every file handed to rsync, sorted."""
        return tuple(sorted(self.missing + self.resume + self.replace))

    @property
    def remove(self) -> tuple[str, ...]:
        """Every file removed on the target before the copy."""
        return tuple(sorted(self.replace + self.extra))


def plan_transfer(source: Manifest, target: Manifest, block: int = 4096) -> Transfer:
    """What makes `target` identical to `source`, entry by entry (sizes rounded up to `block`).

    A link is an entry like a file (kept as a link); whatever the target holds that its link
    policy refuses (a link pointing outside, a FIFO) is removed, never followed.
    """
    missing, resume, replace, identical = [], [], [], 0
    send_bytes = need = 0
    held = target.entries
    for rel, want in sorted(source.entries.items()):
        have = held.get(rel)
        size, had = _size(want), _size(have)
        if have == want:
            identical += 1
        elif have is None and rel not in target.refused:
            missing.append(rel)
            send_bytes += size
            need += _blocks(size, block)
        elif isinstance(have, FileEntry) and isinstance(want, FileEntry) and had < size:
            resume.append(rel)
            send_bytes += size - had
            need += _blocks(size, block) - _blocks(had, block)
        else:
            replace.append(rel)
            send_bytes += size
            need += _blocks(size, block) - _blocks(had, block)
    extra = tuple(sorted((set(held) | set(target.refused)) - set(source.entries)))
    need -= sum(_blocks(_size(held.get(rel)), block) for rel in extra)
    sent = missing + resume + replace
    return Transfer(
        missing=tuple(missing),
        resume=tuple(resume),
        replace=tuple(replace),
        extra=extra,
        identical=identical,
        send_bytes=send_bytes,
        list_bytes=sum(source.files[rel].size for rel in sent if rel in source.files),
        need_bytes=need,
    )


def _size(entry: Entry | None) -> int:
    return entry.size if isinstance(entry, FileEntry) else 0


def _blocks(size: int, block: int) -> int:
    return -(-size // block) * block


def room_problems(node: str, transfer: Transfer, target: Manifest) -> list[str]:
    """Why the copy cannot land on `node`: too little space, or what it cannot write (empty: fine)."""
    room = target.room
    if room is None or not transfer.needed:
        return []
    problems = []
    if transfer.need_bytes > room.free:
        problems.append(
            f"not enough space on {node}: the copy needs {human(transfer.need_bytes)} "
            f"({transfer.need_bytes} bytes) in {target.path}, {room.at} has {human(room.free)} "
            f"({room.free} bytes) free"
        )
    problems += _unwritable(node, transfer, target.path, room)
    return problems


def _unwritable(node: str, transfer: Transfer, path: str, room: Room) -> list[str]:
    if not room.writable:
        where = path if room.at == path else f"{room.at} (to create {path})"
        return [f"cannot write {where} on {node}"]
    touched = {rel.rpartition("/")[0] for rel in transfer.send + transfer.remove} - {""}
    blocked = [u for u in room.unwritable if u in touched or u in transfer.resume]
    return [f"cannot write {path}/{u} on {node}" for u in blocked[:5]] + (
        [f"... and {len(blocked) - 5} more"] if len(blocked) > 5 else []
    )


def remote_host(address: str, ssh: str) -> str:
    """[user@]ADDRESS for the remote shell: the fabric address; the user the node's `ssh` names, if any."""
    return (ssh.split("@", 1)[0] + "@" if "@" in ssh else "") + address


def remote_target(address: str, ssh: str, path: str) -> str:
    """rsync's destination: [user@]ADDRESS:PATH/ (an IPv6 address in brackets)."""
    host = remote_host(f"[{address}]" if ":" in address else address, ssh)
    return f"{host}:{path.rstrip('/')}/"


def rsync_argv(
    source_path: str, destination: str, bwlimit_kib: int | None = None, snapshot: bool = False
) -> tuple[str, ...]:
    """The rsync the source runs: the listed files (NUL-separated on stdin), continued where they stopped.

    A link inside the model is copied as a link. A link out of it is copied as its content only
    for a Hugging Face snapshot (`snapshot`: its files are links into its blobs, the only such
    links its manifest lists); any other model's links out are skipped, even one swapped in
    after its manifest was taken, so nothing outside a model is ever read for a copy.
    """
    return (
        "rsync",
        "--archive",  # modes and times; links as links
        "--copy-unsafe-links" if snapshot else "--safe-links",
        "--append-verify",  # continue a shorter file, then check all of it
        "--from0",
        "--files-from=-",
        "--no-inc-recursive",  # the whole list up front: progress counts against the total
        "--info=progress2",
        f"--out-format={SENT_MARK}%n",  # each file sent (and checked by rsync's whole-file checksum)
        f"--timeout={IO_TIMEOUT}",  # a peer that stops answering ends the copy, not hangs it
        *([f"--bwlimit={bwlimit_kib}"] if bwlimit_kib else []),
        f"{source_path.rstrip('/')}/",
        destination,
    )


def shown(argv: tuple[str, ...]) -> str:
    """argv as a shell line."""
    return shlex.join(argv)


@dataclass(frozen=True, slots=True)
class CopyProgress:
    """A running copy: bytes done of the total, a smoothed rate, when it started."""

    total: int
    done: int = 0
    rate: float = 0.0  # bytes per second
    started: float = 0.0
    at: float = 0.0

    def advance(self, done: int, now: float) -> CopyProgress:
        """The progress after rsync reported `done` bytes at `now` (rate smoothed over a few seconds)."""
        done = min(max(done, self.done), self.total)
        seconds = now - self.at
        if seconds <= 0:
            return CopyProgress(self.total, done, self.rate, self.started, self.at)
        current = (done - self.done) / seconds
        rate = current if self.rate == 0 else 0.7 * self.rate + 0.3 * current
        return CopyProgress(self.total, done, rate, self.started, now)

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate, or None while unknown."""
        return (self.total - self.done) / self.rate if self.rate > 0 else None

    def line(self, node: str, width: int = 10) -> str:
        """`node  1.2 GB / 4.0 GB  30%  350.0 MB/s  ETA 0:08`."""
        percent = 100 * self.done // self.total if self.total else 100
        eta = "--:--" if self.eta is None else _clock(self.eta)
        return (
            f"{node:<{width}} {human(self.done):>9} / {human(self.total):<9} {percent:3d}%  "
            f"{human(self.rate)}/s  ETA {eta}"
        )


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
