"""Is the cluster serving? The watchdog's verdict from what the head shows. Pure.

/health alone cannot tell: a tensor-parallel engine whose other rank is frozen keeps
answering 200 while no request finishes (nothing watches across ranks). So the verdict
also weighs a one-token completion sent with a deadline, and the engine's own counters on
/metrics read before and after it: requests running and waiting, tokens generated.

    down     a rank is not running, /health does not answer 200, or the completion failed
    wedged   /health is fine, but the completion did not finish within the deadline and
             the engine generated no token meanwhile
    serving  the completion finished in time (or the engine is busy but still generating)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SERVING, WEDGED, DOWN = "serving", "wedged", "down"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
GENERATED = "vllm:generation_tokens"


@dataclass(frozen=True, slots=True)
class Counters:
    """The engine's counters at one moment (`at`: seconds on a monotonic clock)."""

    at: float
    running: float
    waiting: float
    generated: float


@dataclass(frozen=True, slots=True)
class Completion:
    """How the one-token completion went: finished (ok), or failed, or still not done at the deadline."""

    ok: bool
    seconds: float
    error: str | None = None
    timed_out: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    """serving, wedged or down, why, and the numbers it rests on."""

    state: str
    reason: str
    completion_seconds: float | None = None
    running: float | None = None
    waiting: float | None = None
    tokens_per_second: float | None = None

    @property
    def serving(self) -> bool:
        """True when the cluster serves."""
        return self.state == SERVING

    def as_dict(self) -> dict[str, Any]:
        """For `status --json` and the supervisor's events."""
        return asdict(self)


def counters_from(totals: dict[str, float], at: float) -> Counters | None:
    """The counters among /metrics' totals by family name; None when the engine reports none."""
    generated = totals.get(GENERATED, totals.get(GENERATED + "_total"))  # as typed, or untyped
    if generated is None:
        return None
    return Counters(at, totals.get(RUNNING, 0.0), totals.get(WAITING, 0.0), generated)


def judge(
    not_running: list[str],
    health: int | None,
    completion: Completion | None,
    before: Counters | None,
    after: Counters | None,
    deadline: float,
    since: Counters | None = None,
) -> Verdict:
    """The verdict from the ranks, /health, the completion and the counters around it.

    `before` and `after` are read just before and after the completion; the rate of tokens
    is over `since` (an earlier reading, e.g. the last refresh) to `after` when given.
    """
    if not_running:
        return Verdict(DOWN, f"not running on {', '.join(not_running)}")
    if health != 200:
        return Verdict(DOWN, f"/health answered {health}" if health else "/health does not answer")
    state, reason = _weigh(completion, before, after, deadline)
    rate, start = None, since or before
    if start is not None and after is not None and after.at > start.at:
        rate = max(0.0, after.generated - start.generated) / (after.at - start.at)
    return Verdict(
        state,
        reason,
        completion.seconds if completion is not None and completion.ok else None,
        after.running if after else None,
        after.waiting if after else None,
        rate,
    )


def _weigh(
    completion: Completion | None, before: Counters | None, after: Counters | None, deadline: float
) -> tuple[str, str]:
    """The state and its reason once the ranks run and /health is 200."""
    if completion is None:
        return DOWN, "no model is served (/v1/models)"
    if completion.ok:
        return SERVING, f"a 1-token completion in {completion.seconds:.1f} s"
    if not completion.timed_out:
        return DOWN, f"/health is 200 but a completion failed: {completion.error}"
    grew = None if before is None or after is None else after.generated - before.generated
    if grew:
        return SERVING, (
            f"busy: a 1-token completion took over {deadline:.0f} s, but the engine generated "
            f"{grew:.0f} token(s) meanwhile"
        )
    queue = "" if after is None else f"; it reports {after.running:.0f} running, {after.waiting:.0f} waiting"
    return WEDGED, (
        f"/health is 200 but no 1-token completion finished within {deadline:.0f} s and the engine "
        f"generated no token meanwhile{queue}"
    )
