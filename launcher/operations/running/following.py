"""Following a starting cluster: every rank's log and exit as they happen, the head's health.

One long-lived watch per node (launcher/node/scripts/watch.py) streams its log, its exit
and a heartbeat a second; the head's /health is asked on its own thread (through the SSH
connection: no command, no shell), more often as the head's log comes closer to serving, and
at once when it says its API is up. Everything arrives on one queue, so a rank's death is
seen within a fraction of a second of its exit, and a node that stops answering within
`lost_after` seconds.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

from launcher.core import remote
from launcher.core.answers.run_answer import WatchEvent
from launcher.core.serving.startup_log import STAGE_NAMES, NodeWatch
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError, StopStream
from launcher.operations.reporter import Reporter

HEAD_READY = STAGE_NAMES.index("KV cache")  # from here on, ask /health more often
API_UP = STAGE_NAMES.index("API up")  # and from here on, often: it answers within a second
HEALTH = "<health>"


@dataclass(frozen=True, slots=True)
class Exited:
    """A rank exited while the cluster was starting."""

    node: str
    code: int | None
    seconds: float


@dataclass(frozen=True, slots=True)
class Lost:
    """A node stopped answering while the cluster was starting."""

    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class Served:
    """The head's /health answered 200."""

    seconds: float


@dataclass(frozen=True, slots=True)
class TimedOut:
    """Nothing failed, but the head did not serve in time."""

    seconds: float


Outcome = Exited | Lost | Served | TimedOut


class Follower:
    """Streams from every node into one queue until `stop()`."""

    def __init__(self, cluster: Cluster, watches: dict[str, NodeWatch], seconds: float) -> None:
        self.cluster = cluster
        self.watches = watches
        self.seconds = seconds
        # (node, its WatchEvent), (HEALTH, None), or what another watcher puts there
        self.events: queue.Queue[tuple[str, object]] = queue.Queue()
        self.stopped = threading.Event()
        self.nudged = threading.Event()  # ask /health now (the head's log says its API is up)

    def start(self, health: bool = True) -> None:
        """One thread per node's watch, and (with `health`) one asking the head's /health."""
        for name in self.watches:
            threading.Thread(target=self._watch, args=(name,), daemon=True).start()
        if health:
            threading.Thread(target=self._health, daemon=True).start()

    def stop(self) -> None:
        """End every stream at its next line (a heartbeat comes each second)."""
        self.stopped.set()
        self.nudged.set()

    def nudge(self) -> None:
        """Have /health asked now, not at the next interval."""
        self.nudged.set()

    def _watch(self, name: str) -> None:
        agent = self.cluster.agents[name]
        call = remote.watch_call(agent.dir, self.watches[name].offset, self.seconds)

        def on_event(event: WatchEvent) -> None:
            if self.stopped.is_set():
                raise StopStream
            self.events.put((name, event))

        try:
            agent.events(call, WatchEvent.parse, on_event)
            self.events.put((name, WatchEvent(ended="the connection closed")))
        except SparkLaunchError as exc:  # a malformed line too: the node counts as lost
            self.events.put((name, WatchEvent(ended=exc.message)))

    def _health(self) -> None:
        head = self.watches[self.cluster.head.name]
        while True:
            self.nudged.wait(0.5 if head.stage >= API_UP else 2 if head.stage >= HEAD_READY else 5)
            self.nudged.clear()
            if self.stopped.is_set():
                return
            try:
                status, _ = self.cluster.http("GET", "/health", timeout=5)
            except NodeError:
                continue
            if status == 200:
                self.events.put((HEALTH, None))


def follow(
    cluster: Cluster,
    watches: dict[str, NodeWatch],
    reporter: Reporter,
    timeout: float,
    lost_after: float,
) -> Outcome:
    """Feed every node's log into its watch until the head serves, a rank exits, a node is lost,
    or `timeout` seconds pass; the outcome. The streams end soon after."""
    began = time.monotonic()
    follower = Follower(cluster, watches, timeout + 30)
    follower.start()
    last_seen = dict.fromkeys(watches, began)
    try:
        while True:
            try:
                name, event = follower.events.get(timeout=0.2)
            except queue.Empty:
                name, event = "", None
            now = time.monotonic()
            if name == HEALTH:
                return Served(now - began)
            if isinstance(event, WatchEvent):
                last_seen[name] = now
                if event.log is not None and event.log_size is not None:
                    before = watches[name].stage
                    watches[name].feed(event.log, event.log_size)
                    if name == cluster.head.name and before < API_UP <= watches[name].stage:
                        follower.nudge()
                if event.alive is False:
                    return Exited(name, event.exit_code, now - began)
                if event.ended is not None:
                    return Lost(name, event.ended)
            reporter.stages({n: w.display for n, w in watches.items()}, now - began)
            silent = [n for n, seen in last_seen.items() if now - seen > lost_after]
            if silent:
                return Lost(silent[0], f"no word from it for {now - last_seen[silent[0]]:.0f} s")
            if now - began > timeout:
                return TimedOut(now - began)
    finally:
        follower.stop()


def drain(cluster: Cluster, watches: dict[str, NodeWatch], seconds: float = 3.0) -> None:
    """Read every node's log to its end after a failure (a dying rank writes a lot at the end)."""

    def read(name: str) -> None:
        watch = watches[name]
        for _ in range(40):
            try:
                status = cluster.agents[name].status(watch.offset)
            except SparkLaunchError:
                return
            if not status.log or status.log_size is None:
                return
            watch.feed(status.log, status.log_size)

    threads = [threading.Thread(target=read, args=(n,), daemon=True) for n in watches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds)
