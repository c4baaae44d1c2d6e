"""The supervisor's values: one event (a JSON line of its log) and the restart policy. Pure.

A restart is always of the whole cluster: every rank is stopped, then all are started
together. Repeated restarts back off exponentially, and after `limit` restarts within
`window` seconds the supervisor stops trying: a cluster that keeps dying needs a person
(restart loops on unified memory have been reported to leak until the node needs a power
cycle).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class Event:
    """Something the supervisor saw or did: when, where, what, why, and what it does about it."""

    time: str  # ISO 8601, UTC
    cluster: str
    node: str | None  # None: the whole cluster
    what: str
    why: str
    action: str

    def json_line(self) -> str:
        """The event as one line of JSON (the supervisor's log)."""
        return json.dumps(asdict(self), sort_keys=False)

    def text(self) -> str:
        """The event for people: `node: what (why) -> action`."""
        where = f"{self.node}: " if self.node else ""
        why = f" ({self.why})" if self.why else ""
        return f"{where}{self.what}{why} -> {self.action}"


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """How often the whole cluster may be restarted, and how long to wait before each."""

    limit: int = 3  # restarts within `window`; one more failure gives up
    window: float = 3600.0
    backoff: float = 10.0  # before the first restart; doubles each time, up to `max_backoff`
    max_backoff: float = 300.0

    def recent(self, restarts: Sequence[float], now: float) -> list[float]:
        """The restarts (monotonic times) that still count at `now`."""
        return [t for t in restarts if now - t < self.window]

    def delay(self, restarts: Sequence[float], now: float) -> float | None:
        """Seconds to wait before the next restart; None when the limit is reached (give up)."""
        count = len(self.recent(restarts, now))
        if count >= self.limit:
            return None
        return float(min(self.backoff * 2**count, self.max_backoff))

    def describe(self) -> str:
        """The policy in words, for the log."""
        return f"at most {self.limit} restart(s) within {self.window:.0f} s"
