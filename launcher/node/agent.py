"""Talking to one node: execute the Calls of `core.remote` there, and read their answers strictly.

Every answer goes through a parser of `core.answers` here, at the boundary: what a node
says that does not parse (forged, truncated, hostile) is a NodeError naming the node and
what was wrong, and so is an answer that says its job failed. Commands get typed values.

Script calls run from the unit (`node.unit`), kept on the node: a call that finds it missing
(or not the one it names: the stub exits with UNIT_MISSING before running anything) sends it
(`unit_call`) and runs again. A node that cannot keep it (its home's folders not its user's
own, or not writable) gets it with every call instead, on stdin.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from launcher.core import remote
from launcher.core.answers import facts_answer, sync_answer
from launcher.core.answers.facts_answer import Facts, ImageFacts
from launcher.core.answers.probe_answer import Listening, Probed
from launcher.core.answers.read import BadAnswer, Refused, loads
from launcher.core.answers.run_answer import Locked, NodeState, RunState, Stopped, started
from launcher.core.answers.unit_answer import Kept
from launcher.core.remote import Call
from launcher.core.render import run_dir
from launcher.core.stubs import UNIT_HOME, UNIT_MISSING, UNIT_MISSING_SAYS
from launcher.core.sync import sync_calls
from launcher.core.sync.model_manifest import Manifest
from launcher.errors import ExitStatus
from launcher.node.executor import Executor, NodeError, Result, Stream
from launcher.node.unit import unit_line, unit_sha

T = TypeVar("T")
log = logging.getLogger("launcher.agent")
PROBE_MARKER = "SPARK_LAUNCH_PROBE "  # the probe's answer line starts so (node/scripts/probe.py MARKER)
FORGED = (
    "spark-launch reads every node's answer strictly: nothing it asked for was acted on; "
    "look at what runs as python3 on that node, and at the scripts' output there"
)


class NotStarted(NodeError):
    """The node's start script would not start the job (it runs already, no such program...)."""

    exit_status = ExitStatus.FAILURE


def stdin_of(call: Call) -> str | None:
    """What the call's stdin gets: the unit first when it is carried (one line), then its data."""
    return unit_line() + (call.data or "") if call.carried and call.script else call.data


def missing(result: Result) -> bool:
    """True when the stub found no unit to run (nothing of the call ran)."""
    return result.exited == UNIT_MISSING and UNIT_MISSING_SAYS in result.stderr


class Agent:
    """One node of one cluster, reached through an Executor."""

    def __init__(self, executor: Executor, cluster: str, node: str) -> None:
        self.executor = executor
        self.node = node
        self.dir = run_dir(cluster, node)
        self.carry = False  # the node cannot keep the unit: every call carries it
        self._sending = threading.Lock()
        self._sent = 0  # units sent to this node so far

    def bound(self, call: Call) -> Call:
        """The call as it is sent: run from this launcher's unit, carried if the node cannot keep it."""
        return call.bound(unit_sha(), carried=self.carry)

    def run(self, call: Call) -> Result:
        """Execute a call; its Result, whatever the exit status."""
        return self._sent_once(
            call, lambda c: self.executor.run(self.node, c.command, stdin=stdin_of(c), timeout=c.timeout)
        )

    def _sent_once(self, call: Call, send: Callable[[Call], Result]) -> Result:
        """`send` the call; when the node has no unit to run it, send the unit and the call again."""
        sent = self._sent
        result = send(self.bound(call))
        if not call.script or call.carried or not missing(result):
            return result
        with self._sending:
            if self._sent == sent:  # no other call of ours has sent it meanwhile
                self._send_unit()
        return send(self.bound(call))

    def _send_unit(self) -> None:
        """Keep the unit on the node; where it cannot be kept, carry it from now on."""
        install = remote.unit_call().bound(unit_sha())
        result = self.executor.run(
            self.node, install.command, stdin=stdin_of(install), timeout=install.timeout
        )
        kept = self._answer(install, result, Kept.parse)
        self._sent += 1
        if kept.error is not None:
            log.warning("node %s: %s: every call carries the launcher's unit instead", self.node, kept.error)
            self.carry = True

    def ready(self) -> None:
        """Have the unit kept on the node now (or learn that it cannot be: calls then carry it),
        for a call that cannot be sent twice."""
        if not self.carry:
            self.ask(remote.unit_call(carried=False), Kept.parse)

    @contextmanager
    def reading(self, what: str) -> Iterator[None]:
        """Turn a malformed or refusing answer of `what` into a NodeError naming this node."""
        try:
            yield
        except BadAnswer as exc:
            raise NodeError(self.node, f"malformed answer from {what}: {exc}", FORGED) from None
        except Refused as exc:
            raise NodeError(self.node, f"{what}: {exc}") from None

    def ask(self, call: Call, parse: Callable[[object], T]) -> T:
        """Execute a script call; its answer (the last JSON line) as `parse` reads it."""
        return self._answer(call, self.run(call), parse)

    def _answer(self, call: Call, result: Result, parse: Callable[[object], T]) -> T:
        """A script call's answer (the last JSON line of its result) as `parse` reads it."""
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if not lines and missing(result):  # sent, yet not found where the next call looks
            raise NodeError(
                self.node,
                f"the node script {call.script} found no unit {unit_sha()[:16]}... after it was sent",
                f"~/{UNIT_HOME} must be the same folder for every SSH command of the node's user",
            )
        if not lines:
            detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise NodeError(
                self.node,
                f"the node script {call.script} failed: {' / '.join(detail) or 'no output'}",
                "the node needs python3 (3.8 or newer) on its PATH",
            )
        with self.reading(f"the node script {call.script}"):
            return parse(loads(lines[-1]))

    def events(
        self,
        call: Call,
        parse: Callable[[object], T],
        on_event: Callable[[T], None],
        on_other: Callable[[str], None] | None = None,
    ) -> Result:
        """Execute a call whose JSON lines come as they are written; each one parsed, to `on_event`
        (and every other line to `on_other`, if given)."""

        what = f"the node script {call.script}" if call.script else f"`{call.command[:60]}`"

        def on_line(line: str) -> None:
            if line.startswith("{"):
                with self.reading(what):
                    event = parse(loads(line))
                on_event(event)
            elif on_other is not None:
                on_other(line)

        return self.stream(call, on_line)

    def stream(self, call: Call, on_line: Callable[[str], None]) -> Result:
        """Execute a call whose output comes line by line (a stub that found no unit writes none)."""
        return self._sent_once(
            call, lambda c: self.executor.stream(self.node, c.command, on_line, stdin=stdin_of(c))
        )

    def launch(self, call: Call) -> Stream:
        """Start a call whose stdin stays open for the caller (its carried unit sent first)."""
        if call.script:
            self.ready()
        bound = self.bound(call)
        stream = self.executor.open(self.node, bound.command)
        if bound.carried and bound.script:
            stream.send(unit_line().encode())
        return stream

    def start(self, job: dict[str, Any], keep: tuple[str, str] | None = None) -> RunState:
        """Start the job (handed over on the call's stdin, with a file to `keep` first, if any);
        what runs now, or a NodeError saying why it does not."""
        answer = self.ask(remote.start_call(self.dir, job, keep), started)
        if isinstance(answer, str):
            raise NotStarted(self.node, answer)
        return answer

    def status(self, offset: int | None = None) -> NodeState:
        """State, liveness and exit status; with `offset`, the log from there on."""
        return self.ask(remote.status_call(self.dir, offset), NodeState.parse)

    def stop(self, grace: float, containers: bool = False) -> Stopped:
        """Stop every process (with `containers`: every container) of ours on the node."""
        return self.ask(remote.stop_call(self.dir, grace, containers), Stopped.parse)

    def logs(self, lines: int, follow: bool, on_line: Callable[[str], None]) -> None:
        """Hand the node's log to `on_line`, line by line; with `follow`, until interrupted."""
        self.stream(remote.logs_call(self.dir, lines, follow), on_line)

    def lock(self, holder: dict[str, Any], stale: str | None = None, status: bool = False) -> Locked:
        """Take the cluster lock (kept beside this node's run directory); with `stale`, break
        the lock of the holder with that token in the same step, if it still has it. With
        `status`, the answer says what runs on the node too (in the same call)."""
        return self.ask(remote.lock_call(self.dir, holder, stale, status), Locked.parse)

    def unlock(self, token: str, keep: tuple[str, str] | None = None) -> Locked:
        """Release the cluster lock held with `token` ('*' forces it); `keep`: a file (path under
        the home, text) the node keeps first, in the same call."""
        return self.ask(remote.unlock_call(self.dir, token, keep), Locked.parse)

    def image(self, image: str) -> ImageFacts:
        """The image as the node's engine holds it, and the engine's free space."""
        return self.ask(remote.image_call(self.dir, image), ImageFacts.parse)

    def facts(self, request: dict[str, Any], on_event: Callable[[Listening], None] | None = None) -> Facts:
        """What `check` compares, gathered on the node in one call (its model manifests and its
        probe cache's answer too); the head's listener's word to `on_event` as soon as it comes."""
        found: list[Facts] = []

        def parse(raw: object) -> Listening | sync_answer.Hashing | Facts:
            said = facts_answer.listening_event(raw) or sync_answer.manifest_event(raw)
            return said if said is not None else facts_answer.facts(raw)

        def on_line(event: Listening | sync_answer.Hashing | Facts) -> None:
            if isinstance(event, Listening):
                if on_event is not None:
                    on_event(event)
            elif not isinstance(event, sync_answer.Hashing):  # a first hash of a model: progress
                found.append(event)

        result = self.events(remote.facts_call(self.dir, request), parse, on_line)
        if not found:
            detail = " / ".join(result.stderr.strip().splitlines()[-3:])
            raise NodeError(
                self.node,
                f"the node script facts failed (exit {result.exited}): {detail or 'no output'}",
                "the node needs python3 (3.8 or newer) on its PATH",
            )
        return found[-1]

    def probe(self, call: Call) -> Probed:
        """The node's own vLLM resolving its command (the probe's marked line), or why it could not."""
        result = self.run(call)
        lines = [x for x in result.stdout.splitlines() if x.startswith(PROBE_MARKER)]
        if not lines:
            tail = (result.stderr or result.stdout).strip().splitlines()[-2:]
            return Probed({}, error=" / ".join(tail) or f"exit {result.exited}")
        with self.reading("the probe"):
            return Probed.parse(loads(lines[-1][len(PROBE_MARKER) :]))

    def manifest(
        self,
        path: str,
        on_event: Callable[[sync_answer.Hashing], None] | None = None,
        adopt: dict[str, list[Any]] | None = None,
    ) -> Manifest:
        """A model directory's manifest; hashing progress goes to `on_event` as it comes.

        `adopt`: files a copy has just proven, recorded as hashed (`sync_calls.manifest_call`)."""
        found: list[Manifest] = []

        def parse(raw: object) -> sync_answer.Hashing | Manifest:
            return sync_answer.manifest_event(raw) or sync_answer.manifest(raw, path)

        def on_line(event: sync_answer.Hashing | Manifest) -> None:
            if isinstance(event, Manifest):
                found.append(event)
            elif on_event is not None:
                on_event(event)

        result = self.events(sync_calls.manifest_call(self.dir, path, adopt), parse, on_line)
        if not found:
            raise NodeError(
                self.node,
                f"the node script manifest failed on {path} (exit {result.exited})",
                "the node needs python3 (3.8 or newer) on its PATH",
            )
        return found[-1]
