"""The copy itself: every target at once, rsync from the source, then verified by manifest.

Direct: the source runs rsync to the target's fabric address over its own SSH.
Relayed: through this machine (sync_relay). Either way the target hashes each file as soon
as the copy has finished it (into its manifest cache), so the check after the copy, which
must find the source's manifest, mostly reads the cache.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from launcher.commands.sync_relay import relayed
from launcher.core import remote
from launcher.core.manifest import Manifest
from launcher.core.sync_report import DirPlan, NodeOutcome
from launcher.core.transfer import DEFAULT_RSH, Progress, plan_transfer, remote_target, rsync_argv
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError, Stream

if TYPE_CHECKING:
    from launcher.commands.sync_models import SyncOptions, SyncReporter

TRIES = 2  # a copy whose result still differs is made once more


def copy_all(
    cluster: Cluster,
    source: str,
    found: dict[str, Manifest],
    outcomes: list[NodeOutcome],
    options: SyncOptions,
    reporter: SyncReporter,
) -> list[NodeOutcome]:
    """Copy to every target that needs it, in parallel; each one's outcome."""
    agent = cluster.agents[source]
    agent.run(remote.install_transfer_call(agent.dir)).checked(source, "keeping the transfer script")
    copying = {o.node: o for o in outcomes if o.state == "would copy"}
    done = _all_at_once(copying, lambda n: _copy(cluster, source, found, copying[n], options, reporter))
    out = []
    for o in outcomes:
        result = done.get(o.node, o)
        if isinstance(result, SparkLaunchError):
            result = replace(o, state="failed", detail=result.message, hint=result.hint)
        out.append(result)
    return out


def _all_at_once(names: Iterable[str], task: Callable[[str], NodeOutcome]) -> dict[str, Any]:
    """Like fan_out, in daemon threads: on Ctrl-C the caller closes the connections and leaves
    at once (each source's transfer script then stops its rsync), instead of waiting here."""
    results: dict[str, Any] = {}

    def guarded(name: str) -> None:
        try:
            results[name] = task(name)
        except SparkLaunchError as exc:
            results[name] = exc

    threads = [threading.Thread(target=guarded, args=(n,), daemon=True) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)
    return results


@dataclass
class _Tally:
    """One target's copy so far: its progress, bytes sent, seconds copying and verifying."""

    progress: Progress
    base: int = 0  # bytes of the directories already done (progress counts across them)
    sent: int = 0
    copying: float = 0.0
    verifying: float = 0.0


def _copy(
    cluster: Cluster,
    source: str,
    found: dict[str, Manifest],
    outcome: NodeOutcome,
    options: SyncOptions,
    reporter: SyncReporter,
) -> NodeOutcome:
    """Every directory of one target, one after the other; the target's outcome."""
    now = time.monotonic()
    tally = _Tally(Progress(sum(d.transfer.list_bytes for d in outcome.dirs), started=now, at=now))
    for index, plan in enumerate(outcome.dirs):
        _copy_dir(
            cluster,
            source,
            found[plan.label],
            outcome.node,
            f"{outcome.node}-{index}",
            plan,
            options,
            reporter,
            tally,
        )
        tally.base += plan.transfer.list_bytes
    return replace(
        outcome,
        state="copied",
        sent_bytes=tally.sent,
        copy_seconds=tally.copying,
        verify_seconds=tally.verifying,
    )


def _copy_dir(
    cluster: Cluster,
    source: str,
    want: Manifest,
    node: str,
    name: str,
    plan: DirPlan,
    options: SyncOptions,
    reporter: SyncReporter,
    tally: _Tally,
) -> None:
    """One directory: ready it, copy, verify; once more if it still differs, then an error."""
    current = plan
    for attempt in range(TRIES):
        if not current.transfer.needed:
            return
        _prepare(cluster, node, name, current)
        began = time.monotonic()
        if current.transfer.send:
            watcher = Prehash.start(cluster, node, want, current)
            try:
                tally.progress = _send(
                    cluster, source, node, name, current, options, tally.base, tally.progress, reporter
                )
            finally:
                checked = time.monotonic()
                watcher.finish()
        tally.sent += current.transfer.send_bytes
        reporter.info(f"{node}: verifying {current.label} {current.path}" + (" again" if attempt else ""))
        checked = time.monotonic() if not current.transfer.send else checked
        have = Manifest.of(cluster.agents[node].manifest(current.path))
        tally.copying += checked - began
        tally.verifying += time.monotonic() - checked
        current = replace(current, transfer=plan_transfer(want, have))
    if current.transfer.needed:
        bad = ", ".join(current.transfer.send + current.transfer.extra)
        raise NodeError(node, f"{plan.path} still differs from {source}'s after {TRIES} copies: {bad}")


def _prepare(cluster: Cluster, node: str, name: str, plan: DirPlan) -> None:
    agent = cluster.agents[node]
    handover, run = remote.prepare_calls(agent.dir, name, plan.path, plan.transfer.remove)
    agent.run(handover).checked(node, "handing over the prepare job")
    answer = agent.ask(run)
    if not answer.get("ok"):
        detail = answer.get("error") or "; ".join(answer.get("errors", []))
        raise NodeError(node, f"cannot make {plan.path} ready: {detail}", "check the owner and mode there")


def _send(
    cluster: Cluster,
    source: str,
    node: str,
    name: str,
    plan: DirPlan,
    options: SyncOptions,
    base: int,
    progress: Progress,
    reporter: SyncReporter,
) -> Progress:
    """rsync one directory's files to the target; the progress after it."""
    spec_node = next(n for n in cluster.spec.nodes if n.name == node)
    destination = remote_target(spec_node.address, spec_node.ssh, plan.path)
    bwlimit = int(options.bwlimit * 1000 * 1000 / 1024) if options.bwlimit else None
    argv = rsync_argv(plan.path, destination, bwlimit)
    agent = cluster.agents[source]
    handover, run = remote.transfer_calls(
        agent.dir, name, argv, plan.transfer.send, DEFAULT_RSH, options.relay
    )
    agent.run(handover).checked(source, "handing over the transfer job")
    state = {"progress": progress}

    def on_event(event: dict[str, Any]) -> None:
        state["progress"] = state["progress"].advance(base + int(event["bytes"]), time.monotonic())
        reporter.progress(node, state["progress"])

    if options.relay:
        answer = relayed(cluster, source, node, run.command, on_event)
    else:
        answer = _direct(cluster, source, run, on_event)
    if not answer.get("ok"):
        raise NodeError(
            node,
            f"rsync from {source} failed (exit {answer.get('exit')}): {answer.get('error') or 'no output'}",
            "run sync models again: it continues where it stopped",
        )
    return state["progress"]


def _direct(
    cluster: Cluster, source: str, run: remote.Call, on_event: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    answer: dict[str, Any] = {}

    def on_line(line: str) -> None:
        if line.startswith("{"):
            data = json.loads(line)
            if data.get("event") == "progress":
                on_event(data)
            elif "event" not in data:
                answer.update(data)

    cluster.agents[source].stream(run, on_line)
    return answer


class Prehash:
    """The target hashing the copied files as they complete (the manifest script's `watch`)."""

    LIMIT = 1 << 17  # its request travels as one argument: beyond this, the check hashes all

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self.idle = threading.Event()
        self.ended = threading.Event()
        if stream is None:
            self.ended.set()
        else:
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    @classmethod
    def start(cls, cluster: Cluster, node: str, want: Manifest, plan: DirPlan) -> Prehash:
        """Start watching the files `plan` sends (known sizes and mtimes), or nothing."""
        expect = {
            rel: [want.files[rel].size, want.mtimes[rel]] for rel in plan.transfer.send if rel in want.mtimes
        }
        agent = cluster.agents[node]
        call = remote.prehash_call(agent.dir, plan.path, expect)
        if not expect or len(call.command) > cls.LIMIT:
            return cls(None)
        return cls(agent.open(call))

    def _read(self, stream: Stream) -> None:
        buffer = b""
        try:
            for chunk in iter(lambda: stream.recv(1 << 16), b""):
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.startswith(b"{"):
                        event = json.loads(line).get("event")
                        (self.idle.set if event == "idle" else self.idle.clear)()
        except (OSError, EOFError, ValueError):
            pass  # it went away: the check after the copy hashes what it did not
        finally:
            self.ended.set()

    def finish(self, limit: float = 3600) -> None:
        """After the copy: let it hash what the copy finished (until it is done or idle), then stop it."""
        self.idle.clear()
        deadline = time.monotonic() + limit
        while not self.ended.wait(0.2) and not self.idle.is_set() and time.monotonic() < deadline:
            pass
        if self.stream is not None:
            self.stream.close()
