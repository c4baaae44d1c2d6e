"""The answers of the imagecopy script (`sync images` node to node), read strictly. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.answers.read import MAX_BYTES, At, BadAnswer
from launcher.core.answers.run_answer import EXIT

MAX_TARGETS = 10_000


@dataclass(frozen=True, slots=True)
class Reach:
    """Whether the head reached one target's engine through its remote shell, and if not why."""

    ok: bool
    failed: str | None = None  # "ssh" or "docker"
    error: str = ""


@dataclass(frozen=True, slots=True)
class Reached:
    """`imagecopy reach`: the remote shell the head used, and each target's Reach."""

    rsh: str
    targets: dict[str, Reach]

    @classmethod
    def parse(cls, raw: object) -> Reached:
        """From the script's answer."""
        at = At(raw)
        targets = {name: _reach(t) for name, t in at.field("targets").entries(At.name, MAX_TARGETS).items()}
        return cls(at.field("rsh").text(), targets)


def _reach(at: At) -> Reach:
    ok = at.field("ok").flag()
    failed = at.maybe("failed", lambda a: a.one_of("ssh", "docker"))
    return Reach(ok, None if ok else failed or "ssh", at.maybe("error", At.text) or "")


@dataclass(frozen=True, slots=True)
class Loaded:
    """How one target's `docker load` ended, and the bytes it was given."""

    exit: int | None
    error: str
    bytes: int


@dataclass(frozen=True, slots=True)
class Copied:
    """`imagecopy send`'s last line: the save's end and each target's load."""

    save_exit: int | None
    save_error: str
    targets: dict[str, Loaded]


def sent_event(raw: object) -> dict[str, int] | Copied:
    """One line of `imagecopy send`: bytes given per target so far, or the final answer."""
    at = At(raw)
    if at.maybe("event", lambda a: a.one_of("progress")) is not None:
        return {n: b.integer() for n, b in at.field("sent").entries(At.name, MAX_TARGETS).items()}
    save = at.field("save")
    loads = at.field("targets").entries(At.name, MAX_TARGETS)
    return Copied(_exit(save), save.maybe("error", At.text) or "", {n: _loaded(t) for n, t in loads.items()})


def _loaded(at: At) -> Loaded:
    given = at.maybe("bytes", At.integer) or 0
    if given > MAX_BYTES:
        raise BadAnswer(at.where, f"{given} bytes: no image is that large")
    return Loaded(_exit(at), at.maybe("error", At.text) or "", given)


def _exit(at: At) -> int | None:
    return at.maybe("exit", lambda a: a.integer(*EXIT))
