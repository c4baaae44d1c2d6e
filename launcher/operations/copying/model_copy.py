"""The copy itself: every target at once, rsync from the source, then verified by manifest.

Direct: the source runs rsync to the target's fabric address over its own SSH.
Relayed: through this machine (`sync.relay`). Either way the check after the copy is the
target's manifest, which must equal the source's. rsync already proves each file it sends
(a whole-file checksum of the source's bytes, computed on both sides, compared by the
receiver): the source's transfer script names the sent files whose bytes are still the ones
its manifest hashed, and the target records their sha256 from that proof instead of
reading them again, so the copy gets the cores to itself. Whatever is not so proven (a
file changed on the source meanwhile, one rsync did not send) the target hashes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from launcher.core import remote
from launcher.core.answers.sync_answer import Progress, Sent, TransferEvent, prepared, transfer_event
from launcher.core.sync import sync_calls
from launcher.core.sync.model_manifest import Manifest
from launcher.core.sync.receiver import receiver_for
from launcher.core.sync.sync_report import DirPlan, NodeOutcome
from launcher.core.sync.transfer_plan import (
    DEFAULT_RSH,
    CopyProgress,
    plan_transfer,
    remote_host,
    remote_target,
    rsync_argv,
)
from launcher.errors import SparkLaunchError
from launcher.node.agent import Agent
from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError, fan_out
from launcher.operations.copying.relayed_copy import relayed
from launcher.operations.copying.sync_options import SyncOptions, SyncReporter

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
    copying = {o.node: o for o in outcomes if o.state == "would copy"}
    if not copying:
        return outcomes
    done = _all_at_once(
        copying, lambda n: _TargetCopy(cluster, source, found, copying[n], options, reporter).run()
    )
    out = []
    for o in outcomes:
        result = done.get(o.node, o)
        if isinstance(result, SparkLaunchError):
            result = replace(o, state="failed", detail=result.message, hint=result.hint)
        out.append(result)
    return out


def _all_at_once(names: Iterable[str], task: Callable[[str], NodeOutcome]) -> dict[str, Any]:
    """fan_out: on Ctrl-C the caller closes the connections and leaves at once (each source's
    transfer script then stops its rsync), instead of waiting here."""
    return fan_out(names, task)


class _TargetCopy:
    """One target's copy: each directory readied, copied and verified; progress and timings kept."""

    def __init__(
        self,
        cluster: Cluster,
        source: str,
        found: dict[str, Manifest],
        outcome: NodeOutcome,
        options: SyncOptions,
        reporter: SyncReporter,
    ) -> None:
        self.cluster, self.source, self.found, self.outcome = cluster, source, found, outcome
        self.node, self.options, self.reporter = outcome.node, options, reporter
        now = time.monotonic()
        self.progress = CopyProgress(sum(d.transfer.list_bytes for d in outcome.dirs), started=now, at=now)
        self.base = 0  # bytes of the directories done (progress counts across them)
        self.sent, self.copying, self.verifying = 0, 0.0, 0.0
        self.proven, self.hashed = 0, 0  # files rsync proved; bytes the target hashed to verify

    def run(self) -> NodeOutcome:
        """Every directory, one after the other; the target's outcome."""
        for index, plan in enumerate(self.outcome.dirs):
            self._directory(plan, f"{self.node}-{index}")
            self.base += plan.transfer.list_bytes
        return replace(
            self.outcome,
            state="copied",
            sent_bytes=self.sent,
            copy_seconds=self.copying,
            verify_seconds=self.verifying,
            proven_files=self.proven,
            hashed_bytes=self.hashed,
        )

    def _directory(self, plan: DirPlan, name: str) -> None:
        """Ready, copy, verify; once more if it still differs, then an error naming the files."""
        want, current = self.found[plan.label], plan
        for attempt in range(TRIES):
            if not current.transfer.needed:
                return
            if current.prepare or attempt:
                self._prepare(current, name)
            began = time.monotonic()
            proven = self._send(current, name, want) if current.transfer.send else {}
            copied = time.monotonic()
            self.sent += current.transfer.send_bytes
            self.reporter.info(
                f"{self.node}: verifying {plan.label} {plan.path}" + (" again" if attempt else "")
            )
            have = self.cluster.agents[self.node].manifest(plan.path, adopt=proven)
            self.proven += have.adopted
            self.hashed += have.hashed_bytes
            self.copying += copied - began
            self.verifying += time.monotonic() - copied
            current = replace(current, transfer=plan_transfer(want, have))
        if current.transfer.needed:
            bad = ", ".join(current.transfer.send + current.transfer.extra)
            raise NodeError(
                self.node, f"{plan.path} still differs from {self.source}'s after {TRIES} copies: {bad}"
            )

    def _prepare(self, plan: DirPlan, name: str) -> None:
        agent = self.cluster.agents[self.node]
        handover, run = sync_calls.prepare_calls(agent.dir, name, plan.path, plan.transfer.remove)
        agent.run(handover).checked(self.node, "handing over the prepare job")
        why = agent.ask(run, prepared)
        if why is not None:
            raise NodeError(
                self.node, f"cannot make {plan.path} ready: {why}", "check the owner and mode there"
            )

    def _send(self, plan: DirPlan, name: str, want: Manifest) -> dict[str, list[Any]]:
        """rsync the directory's files from the source to the target, reporting progress; the
        files rsync proved, as the target's manifest adopts them ({file: [size, mtime, sha256]})."""
        node = next(n for n in self.cluster.spec.nodes if n.name == self.node)
        bwlimit = int(self.options.bwlimit * 1e6 / 1024) if self.options.bwlimit else None
        destination = remote_target(node.address, node.ssh, plan.path)
        argv = rsync_argv(plan.path, destination, bwlimit, self.found[plan.label].snapshot)
        agent = self.cluster.agents[self.source]
        files = {rel: want.files[rel].sha256 for rel in plan.transfer.send}
        handover, run = sync_calls.transfer_calls(
            agent.dir,
            name,
            argv,
            files,
            DEFAULT_RSH,
            self.options.relay,
            plan.path,
            remote_host(node.address, node.ssh),
        )
        if handover is not None:
            agent.run(handover).checked(self.source, "handing over the transfer job")
        if self.options.relay:
            receiver = receiver_for(argv, plan.path)  # what runs on the target: ours, not the source's
            sent = relayed(self.cluster, self.source, self.node, run, receiver, self._advanced)
        else:
            sent = _direct(agent, run, self._advanced)
        if not sent.ok:
            raise NodeError(
                self.node,
                f"rsync from {self.source} failed (exit {sent.exit}): {sent.error or 'no output'}",
                "run sync models again: it continues where it stopped",
            )
        verified = [rel for rel in sent.verified if rel in files and rel in want.mtimes]
        return {rel: [want.files[rel].size, want.mtimes[rel], files[rel]] for rel in verified}

    def _advanced(self, event: Progress) -> None:
        self.progress = self.progress.advance(self.base + event.bytes, time.monotonic())
        self.reporter.progress(self.node, self.progress)


def _direct(agent: Agent, run: remote.Call, on_event: Callable[[Progress], None]) -> Sent:
    """The source's rsync straight to the target; its progress as it comes, and how it ended."""
    ended: list[Sent] = []

    def on_line(event: TransferEvent) -> None:
        if isinstance(event, Progress):
            on_event(event)
        elif isinstance(event, Sent):
            ended.append(event)
        else:  # a relay request on a direct copy: nothing asked for it
            raise NodeError(agent.node, "asked for a relay on a direct copy: refused")

    agent.events(run, transfer_event, on_line)
    return ended[-1] if ended else Sent(False, None, "the transfer script ended without saying how")
