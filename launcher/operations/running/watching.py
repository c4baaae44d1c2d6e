"""Watching a serving cluster until something is wrong: for `supervise`.

Every rank through one streaming watch per node (`follow.Follower`: a rank's exit is seen
within a fraction of a second, a silent node within seconds), and the head through the
watchdog every `interval` seconds on its own thread (`serving.head_verdict`). A lost stream is
looked at again over fresh connections before it counts: a network blip is not a death.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from launcher.core.answers.run_answer import WatchEvent
from launcher.core.serving.startup_log import NodeWatch, diagnose
from launcher.core.serving.watchdog import DOWN, SERVING, WEDGED, Counters, Verdict
from launcher.errors import ExitStatus, SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.operations.reporter import Reporter
from launcher.operations.running.cluster_status import status
from launcher.operations.running.following import Follower, drain
from launcher.operations.running.head_health import LOST_AFTER_SECONDS, head_verdict

VERDICT = "<watchdog>"
STREAM_SECONDS = 6 * 3600.0  # each node's watch is renewed this often
SOON = 5.0  # after a bad verdict, ask again this soon
DOWN_TIMES = 2  # a `down` verdict (ranks alive) counts once seen this many times in a row


class Say(Protocol):
    """Emits one event."""

    def __call__(self, node: str | None, what: str, why: str, action: str) -> None:
        """Emit it."""


@dataclass(frozen=True, slots=True)
class HeadVerdict:
    """The watchdog's verdict on the head, and the counters it read."""

    verdict: Verdict
    counters: Counters | None


@dataclass(frozen=True, slots=True)
class Trouble:
    """Why the cluster must be restarted: where, what, why, and the exit status if it is the last."""

    node: str | None
    what: str
    why: str
    exit_status: ExitStatus = ExitStatus.FAILURE
    details: tuple[str, ...] = ()  # more lines for people (each node not reached, and its fix)


def watch(
    cluster: Cluster,
    interval: float,
    deadline: float,
    say: Say,
    reporter: Reporter,
    clock: Callable[[], float] = time.monotonic,
) -> Trouble:
    """Watch the serving cluster until a rank exits, a node is lost, or the head is wedged or down."""
    watches = {n.name: NodeWatch(n.name, n.rank) for n in cluster.plan.nodes}
    while True:
        follower = Follower(cluster, watches, STREAM_SECONDS)
        follower.start(health=False)
        try:
            trouble = _follow(follower, cluster, watches, interval, deadline, say, clock)
        finally:
            follower.stop()
        if trouble.what == "renew":
            continue
        if trouble.what == "node lost":
            again = _look_again(cluster, deadline)
            if again is not None:
                return Trouble(trouble.node, trouble.what, f"{trouble.why}; {again}", trouble.exit_status)
            say(trouble.node, "reconnected", trouble.why, "keep watching: every rank runs and it serves")
            continue
        if trouble.what == "rank exited":
            title = _explain(cluster, watches, trouble, reporter)
            if title:
                return Trouble(trouble.node, trouble.what, f"{trouble.why}; {title}", trouble.exit_status)
        return trouble


def _follow(
    follower: Follower,
    cluster: Cluster,
    watches: dict[str, NodeWatch],
    interval: float,
    deadline: float,
    say: Say,
    clock: Callable[[], float],
) -> Trouble:
    """Consume the streams and the watchdog's verdicts until there is trouble."""
    began = clock()
    last_seen = dict.fromkeys(watches, began)
    next_verdict, asking, downs = began + interval, False, 0
    since: Counters | None = None
    while True:
        try:
            name, event = follower.events.get(timeout=0.5)
        except queue.Empty:
            name, event = "", None
        now = clock()
        if name == VERDICT and isinstance(event, HeadVerdict):
            asking = False
            verdict, since = event.verdict, event.counters or since
            downs = downs + 1 if verdict.state == DOWN else 0
            trouble = _judged(cluster, verdict, downs, interval, say)
            if trouble:
                return trouble
            next_verdict = now + (interval if verdict.state == SERVING else min(interval, SOON))
        elif isinstance(event, WatchEvent):
            last_seen[name] = now
            trouble = _node_event(watches, name, event, now - began)
            if trouble:
                return trouble
        silent = [n for n, seen in last_seen.items() if now - seen > LOST_AFTER_SECONDS]
        if silent:
            return Trouble(silent[0], "node lost", f"no word from it for {now - last_seen[silent[0]]:.0f} s")
        if not asking and now >= next_verdict:
            asking = True
            threading.Thread(target=_ask_head, args=(follower, cluster, deadline, since), daemon=True).start()


def _node_event(watches: dict[str, NodeWatch], name: str, event: WatchEvent, age: float) -> Trouble | None:
    """A line from a node's watch: log, a heartbeat, the rank's exit, or the stream's end."""
    if event.log is not None and event.log_size is not None:
        watches[name].feed(event.log, event.log_size)
    if event.alive is False:
        code = event.exit_code
        how = f"exit status {code}" if code is not None else "its processes are gone"
        return Trouble(name, "rank exited", how)
    if event.ended is not None:
        if age >= STREAM_SECONDS:
            return Trouble(name, "renew", event.ended)
        return Trouble(name, "node lost", event.ended, ExitStatus.UNREACHABLE)
    return None


def _judged(cluster: Cluster, verdict: Verdict, downs: int, interval: float, say: Say) -> Trouble | None:
    """Trouble from the watchdog's verdict: wedged at once, down when seen DOWN_TIMES in a row."""
    head = cluster.head.name
    if verdict.state == WEDGED:
        return Trouble(head, "wedged", verdict.reason)
    if verdict.state == DOWN and downs >= DOWN_TIMES:
        return Trouble(head, "not serving", verdict.reason)
    if verdict.state == DOWN:
        say(head, "not serving", verdict.reason, f"look again in {min(interval, SOON):.0f} s")
    return None


def _ask_head(follower: Follower, cluster: Cluster, deadline: float, since: Counters | None) -> None:
    """Run the watchdog and post its verdict to the follower's queue (always: the loop waits for it)."""
    try:
        verdict, counters = head_verdict(cluster, deadline, since)
    except Exception as exc:  # a failure to look is no proof it serves; the thread must still answer
        verdict, counters = Verdict(DOWN, f"the watchdog could not ask the head: {exc}"), None
    follower.events.put((VERDICT, HeadVerdict(verdict, counters)))


def _look_again(cluster: Cluster, deadline: float) -> str | None:
    """After a lost stream: None when every rank still runs and it serves; else what is wrong."""
    try:
        found = status(cluster, deadline)
    except SparkLaunchError as exc:
        return f"looking again failed: {exc.message}"
    if found.state != "running":
        return f"the cluster is {found.state}"
    if found.serving is not None and found.serving.state != SERVING:
        return f"{found.serving.state}: {found.serving.reason}"
    return None


def _explain(
    cluster: Cluster, watches: dict[str, NodeWatch], trouble: Trouble, reporter: Reporter
) -> str | None:
    """The dead rank's last lines and (when known) why, for the operator's terminal or journal;
    the diagnosis' title."""
    drain(cluster, watches)
    assert trouble.node is not None
    watch = watches[trouble.node]
    found = diagnose(watch.text)
    for other in watches.values():
        found = found or diagnose(other.text)
    reporter.info(f"last lines of {trouble.node}'s log:")
    for line in watch.tail[-10:]:
        reporter.info(f"    {line[:240]}")
    if found:
        reporter.info(f"diagnosis: {found.title}; evidence: {found.evidence}")
    return found.title if found else None
