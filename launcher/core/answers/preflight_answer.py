"""The collective preflight's lines (scripts/preflight.py), read strictly. Pure.

The preflight streams progress events (its stage, what it reached, the port the head's
store listens on) and ends with one answer holding `ok`; the port call answers a free port.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from launcher.core.answers.read import At, Refused
from launcher.core.answers.run_answer import failed

MAX_PORT = 65535
MAX_NODES = 1024
BACKENDS = ("gloo", "nccl")
FIGURES = ("latency_us", "bytes", "busbw_gbps")  # and algbw_gbps, where given


def free_port(raw: object) -> int:
    """The port call's answer: a port free on the head just now."""
    at = At(raw)
    error = failed(at)
    if error is not None:
        raise Refused(error)
    return at.field("port").integer(1, MAX_PORT)


@dataclass(frozen=True, slots=True)
class Stage:
    """Where a node's preflight stands now (said again should it end without an answer)."""

    stage: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Reached:
    """What a node's own connections reached: target node -> ok, refused, timed out, ..."""

    reached: dict[str, str]


@dataclass(frozen=True, slots=True)
class Serving:
    """The head's store listens on this port."""

    port: int


@dataclass(frozen=True, slots=True)
class PreflightAnswer:
    """One node's preflight, as its script answered (or as the launcher saw it end)."""

    ok: bool
    stage: str
    error: str | None = None
    reached: dict[str, str] = field(default_factory=dict)
    figures: dict[str, dict[str, float]] = field(default_factory=dict)  # backend -> latency, bandwidth
    seconds: float | None = None

    @classmethod
    def parse(cls, raw: object) -> PreflightAnswer:
        """The script's last line, checked field by field."""
        at = At(raw)
        figures = at.maybe("figures", lambda a: a.entries(lambda k: k.one_of(*BACKENDS), len(BACKENDS)))
        return cls(
            ok=at.field("ok").flag(),
            stage=at.field("stage").name(),
            error=at.maybe("error", At.text),
            reached=at.maybe("reached", _reached) or {},
            figures={b: _figures(f) for b, f in (figures or {}).items()},
            seconds=at.maybe("seconds", lambda a: a.number(0, 1e6)),
        )


def _reached(at: At) -> dict[str, str]:
    return {k: v.name() for k, v in at.entries(At.name, MAX_NODES).items()}


def _figures(at: At) -> dict[str, float]:
    figures = {k: at.field(k).number() for k in FIGURES}
    algbw = at.maybe("algbw_gbps", At.number)
    return figures if algbw is None else {**figures, "algbw_gbps": algbw}


def preflight_line(raw: object) -> Stage | Reached | Serving | PreflightAnswer:
    """One JSON line of the preflight: an event, or its answer."""
    at = At(raw)
    event = at.get("event")
    if event is None:
        return PreflightAnswer.parse(raw)
    kind = event.one_of("stage", "reached", "listening")
    if kind == "stage":
        return Stage(at.field("stage").name(), at.maybe("detail", At.text) or "")
    if kind == "reached":
        return Reached(_reached(at.field("reached")))
    return Serving(at.field("port").integer(1, MAX_PORT))
