"""The answers of the scripts that run a rank: start, status, watch, stop, lock, drop. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from launcher.core.answers.read import MAX_BYTES, At, BadAnswer

MAX_PID = 1 << 22  # Linux's pid_max ceiling
EXIT = (-1024, 1024)  # an exit status, or a negated signal


def _pid(at: At) -> int:
    return at.integer(1, MAX_PID)


def _exit(at: At) -> int:
    return at.integer(*EXIT)


def _time(at: At) -> float:
    return at.number(0.0, 1e11)


@dataclass(frozen=True, slots=True)
class RunState:
    """What runs (or last ran) on a node: the node's state.json, as far as the launcher reads it."""

    run_id: str
    digest: str
    pid: int | None = None
    started_at: float | None = None
    container: str | None = None
    stopped_at: float | None = None
    argv: tuple[str, ...] = ()  # the command it runs: where the API listens, for a spec that does not plan

    @classmethod
    def read(cls, at: At) -> RunState:
        """From the state object of a start or status answer."""
        return cls(
            run_id=at.field("run_id").run_id(),
            digest=at.field("digest").name(128),
            pid=at.maybe("pid", _pid),
            started_at=at.maybe("started_at", _time),
            container=at.maybe("container", At.name),
            stopped_at=at.maybe("stopped_at", _time),
            argv=tuple(w.text() for w in at.maybe("argv", At.items) or []),
        )


def failed(at: At) -> str | None:
    """The error of an answer that says `ok: false` (None when it says `ok: true`)."""
    if at.field("ok").flag():
        return None
    found = at.get("error")
    return found.text() if found is not None else "the node script gave no reason"


def started(raw: object) -> RunState | str:
    """The start script's answer: the state of what it started, or why it did not."""
    at = At(raw)
    return failed(at) or RunState.read(at.field("state"))


@dataclass(frozen=True, slots=True)
class NodeState:
    """The status script's answer: liveness, exit status, and the log from an offset."""

    alive: bool
    processes: int
    state: RunState | None
    exit_code: int | None = None
    log: str | None = None
    log_size: int | None = None

    @classmethod
    def parse(cls, raw: object) -> NodeState:
        """From the status script's answer."""
        return cls.read(At(raw))

    @classmethod
    def read(cls, at: At) -> NodeState:
        """From a status answer where it is found (alone, or in the lock's answer to `hold`)."""
        if failed(at):
            raise BadAnswer("ok", "the status script says it failed")
        return cls(
            alive=at.field("alive").flag(),
            processes=at.field("processes").integer(0, MAX_PID),
            state=at.maybe("state", RunState.read),
            exit_code=at.maybe("exit_code", _exit),
            log=at.maybe("log", At.content),
            log_size=at.maybe("log_size", At.integer),
        )


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A line of a rank's watch (its log, a heartbeat, its exit), or the end of the stream."""

    log: str | None = None
    log_size: int | None = None
    alive: bool | None = None
    exit_code: int | None = None
    ended: str | None = None  # set here, never by the node: why the stream ended

    @classmethod
    def parse(cls, raw: object) -> WatchEvent:
        """From one JSON line of the watch script."""
        at = At(raw)
        event = cls(
            log=at.maybe("log", At.content),
            log_size=at.maybe("log_size", At.integer),
            alive=at.maybe("alive", At.flag),
            exit_code=at.maybe("exit_code", _exit),
        )
        if (event.log is None) != (event.log_size is None):
            raise BadAnswer("log", "a log chunk comes with its log_size, and only with it")
        if event.log is None and event.alive is None:
            raise BadAnswer("answer", "neither a log chunk nor a heartbeat nor an exit")
        return event


@dataclass(frozen=True, slots=True)
class Stopped:
    """The stop script's answer: what it found, signalled, removed and left."""

    found: int
    remaining: int
    ok: bool = True  # nothing of ours left
    groups: int = 0
    killed: int = 0
    removed: int = 0
    containers: bool = False
    error: str | None = None

    @classmethod
    def parse(cls, raw: object) -> Stopped:
        """From the stop script's answer."""
        at = At(raw)
        count = At.integer
        return cls(
            found=count(at.field("found")),
            remaining=count(at.field("remaining")),
            ok=at.field("ok").flag(),
            groups=at.maybe("groups", count) or 0,
            killed=at.maybe("killed", count) or 0,
            removed=at.maybe("removed", count) or 0,
            containers=at.maybe("containers", At.flag) or False,
            error=at.maybe("error", At.text),
        )


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a cluster's lock, as its lock file says (an unreadable one: nothing)."""

    token: str | None = None
    host: str | None = None
    pid: int | None = None
    started: str | None = None  # the process's start (boot id and start time): tells pids apart
    user: str | None = None
    command: str | None = None
    run_id: str | None = None
    since: float | None = None

    @classmethod
    def read(cls, at: At) -> Holder:
        """From the holder object of a lock answer (an unreadable lock file gives {})."""
        return cls(
            token=at.maybe("token", At.name),
            host=at.maybe("host", At.name),
            pid=at.maybe("pid", _pid),
            started=at.maybe("started", At.name),
            user=at.maybe("user", At.name),
            command=at.maybe("command", At.name),
            run_id=at.maybe("run_id", At.run_id),
            since=at.maybe("since", _time),
        )

    def as_dict(self) -> dict[str, object]:
        """What it says, as `node.locking` reads a holder (only what is known)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True, slots=True)
class Locked:
    """The lock script's answer: taken (or released), or who holds it; for `hold`, what runs on
    the node once it was taken."""

    ok: bool
    holder: Holder
    state: NodeState | None = None

    @classmethod
    def parse(cls, raw: object) -> Locked:
        """From the lock script's answer."""
        at = At(raw)
        holder = at.maybe("holder", Holder.read) or Holder()
        return cls(at.field("ok").flag(), holder, at.maybe("status", NodeState.read))


@dataclass(frozen=True, slots=True)
class Dropped:
    """The drop script's answer: MemFree before and after, or why the cache was not dropped."""

    free_before: int = 0
    free_after: int = 0
    error: str | None = None
    user: str | None = None

    @classmethod
    def parse(cls, raw: object) -> Dropped:
        """From the drop script's answer."""
        at = At(raw)
        error = failed(at)
        if error is not None:
            return cls(error=error, user=at.maybe("user", At.name))
        return cls(
            at.field("free_before").integer(0, MAX_BYTES), at.field("free_after").integer(0, MAX_BYTES)
        )
