"""The answers of the net, probe, gather and stacks scripts. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from launcher.core.answers.read import MAX_CONTENT, At, Refused, strings
from launcher.core.answers.run_answer import failed

MAX_PORT = 65535


@dataclass(frozen=True, slots=True)
class Listening:
    """The net script's first line: listening on a port, or why it cannot."""

    port: int | None
    error: str | None = None

    @classmethod
    def parse(cls, raw: object) -> Listening:
        """From the first line of `net listen`."""
        at = At(raw)
        if at.get("listening") is not None and at.field("listening").flag():
            return cls(at.field("port").integer(1, MAX_PORT))
        return cls(None, failed(at) or "the listener gave no port")


def peers(raw: object) -> tuple[str, ...]:
    """The addresses `net listen` saw connect (its last line)."""
    at = At(raw)
    error = failed(at)
    if error is not None:
        raise Refused(error)
    return strings(at.field("peers"), lambda a: a.name(64), 1024)


def connected(raw: object) -> str | None:
    """`net connect`'s answer: None when the connection was made, else why not."""
    return failed(At(raw))


@dataclass(frozen=True, slots=True)
class Probed:
    """What a node's own vLLM resolved from its exact command (or why it could not)."""

    resolved: dict[str, Any]
    cached: bool = False
    vllm_version: str | None = None
    error: str | None = None

    @classmethod
    def parse(cls, raw: object) -> Probed:
        """From the probe's marked JSON line."""
        at = At(raw)
        error = failed(at)
        if error is not None:
            return cls({}, error=error)
        resolved = at.field("resolved")
        values = {key: value.json(8, 10_000) for key, value in resolved.entries(At.name, 10_000).items()}
        return cls(
            values,
            at.maybe("cached", At.flag) or False,
            at.maybe("vllm_version", lambda a: a.name(128)),
        )


def gathered(raw: object) -> dict[str, str]:
    """The gather script's files by the names the node gives them (diagnose chooses the names it
    writes: a name that is not a plain relative one is kept only as text)."""
    at = At(raw)
    error = failed(at)
    if error is not None:
        raise Refused(error)
    files = at.field("files").entries(lambda a: a.text(4096), 10_000)
    return {path: text.content(MAX_CONTENT) for path, text in files.items()}


class Dumped(TypedDict, total=False):
    """One process's py-spy dump, as the stacks script reports it (its text is in the files)."""

    pid: int
    cmdline: str
    ok: bool
    paused: bool
    error: str


class Captured(TypedDict, total=False):
    """The stacks script's answer: what it captured of our processes, and where it kept it."""

    run_id: str
    py_spy: str | None
    hint: str | None
    ptrace: str
    processes: list[Dumped]
    python_pids: list[int]
    files: dict[str, str]
    texts: dict[str, str]


def captured(raw: object) -> Captured:
    """The stacks script's answer."""
    at = At(raw)
    error = failed(at)
    if error is not None:
        raise Refused(error)
    return Captured(
        run_id=at.field("run_id").name(128),
        py_spy=at.maybe("py_spy", At.absolute),
        hint=at.maybe("hint", At.text),
        ptrace=at.field("ptrace").name(),
        processes=[_dumped(p) for p in at.field("processes").items(10_000)],
        python_pids=[p.integer(1, 1 << 22) for p in at.field("python_pids").items(10_000)],
        files={k: v.absolute() for k, v in at.field("files").entries(At.relative, 100).items()},
        texts={k: v.content() for k, v in at.field("texts").entries(At.relative, 100).items()},
    )


def _dumped(at: At) -> Dumped:
    out = Dumped(pid=at.field("pid").integer(1, 1 << 22), cmdline=at.field("cmdline").text(4096))
    out["ok"] = at.field("ok").flag()
    if at.get("paused") is not None:
        out["paused"] = at.field("paused").flag()
    if at.get("error") is not None:
        out["error"] = at.field("error").text()
    return out
