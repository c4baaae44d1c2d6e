"""Keeping one cluster serving, in the foreground (`supervise`, under systemd or in a terminal).

Brings the cluster up unless it already runs this plan, then watches it: every rank's exit
through one streaming watch per node (the same as `up` follows a start), and the head
through the watchdog (a one-token completion with a deadline, and the engine's counters).
On a dead rank, a lost node or a wedged engine it stops EVERY rank and starts the whole
cluster again (`up`, with its check), after an exponential back-off; after the policy's
limit of restarts within its window it stops trying, leaves nothing running and fails.
Every event goes to `emit` (the CLI writes each as one JSON line). SIGTERM or Ctrl-C
(KeyboardInterrupt) stops the cluster cleanly.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from launcher.core.serving.supervision import Event, RestartPolicy
from launcher.errors import ExitStatus, SparkLaunchError, one_line
from launcher.node.cluster import Cluster, Unreachable
from launcher.operations.evidence import capture
from launcher.operations.receipt_store import add_evidence
from launcher.operations.reporter import Reporter
from launcher.operations.running.cluster_status import status
from launcher.operations.running.starting import Interrupted, PlanConflict, States, UpOptions, up
from launcher.operations.running.stopping import stop_reachable
from launcher.operations.running.watching import Trouble, watch


class GaveUp(SparkLaunchError):
    """Too many restarts within the window: every rank was stopped, and the supervisor ends."""

    def __init__(
        self, message: str, hint: str, exit_status: ExitStatus, details: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, hint)
        self.exit_status = exit_status
        self.details = details

    def render(self) -> str:
        """The verdict, the last trouble's details (each node not reached, and why), the hint."""
        return "\n".join([self.message, *self.details, f"  hint: {self.hint}"])


class Terminated(KeyboardInterrupt):
    """A signal asked the supervisor to stop (SIGTERM from systemd): stop the cluster and end."""


@dataclass(frozen=True, slots=True)
class SuperviseOptions:
    """How the supervisor watches and restarts."""

    policy: RestartPolicy = field(default_factory=RestartPolicy)
    interval: float = 30.0  # seconds between two watchdog probes
    deadline: float = 30.0  # the probe completion's deadline
    up: UpOptions = field(default_factory=UpOptions)  # how each start runs (drop_caches, check, ...)


@dataclass(frozen=True, slots=True)
class Stopped:
    """How the supervisor ended when asked to stop: why, and what was stopped."""

    why: str
    restarts: int


class Say:
    """Builds events (time, cluster, node, what, why, action) and hands each to `emit`."""

    def __init__(self, cluster: str, emit: Callable[[Event], None]) -> None:
        self.cluster = cluster
        self.emit = emit

    def __call__(self, node: str | None, what: str, why: str, action: str) -> None:
        """Emit one event, stamped now (UTC)."""
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        self.emit(Event(now, self.cluster, node, what, why, action))


def supervise(
    cluster: Cluster,
    secret_values: dict[str, str],
    options: SuperviseOptions,
    emit: Callable[[Event], None],
    reporter: Reporter,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    stopping: threading.Event | None = None,
) -> Stopped:
    """Keep the cluster serving until asked to stop (Stopped), or until the restart limit (GaveUp).

    `stopping`: set by whoever supervises several deployments at once and stops them all; the
    trouble that follows (the ranks it stopped) then ends this supervisor instead of a restart.
    """
    say = Say(cluster.spec.name, emit)
    policy = options.policy
    say(None, "supervising", f"plan {cluster.plan.digest}; {policy.describe()}", "start unless it runs")
    restarts: list[float] = []
    try:
        _stop_a_partial_run(cluster, options, say)
        while not _asked(stopping):
            trouble, run_id = _start(cluster, secret_values, options, say, reporter)
            trouble = trouble or watch(cluster, options.interval, options.deadline, say, reporter, clock)
            if _asked(stopping):
                break
            _keep_evidence(cluster, secret_values, trouble, run_id, say)
            delay = policy.delay(restarts, clock())
            if delay is None:
                raise _give_up(cluster, options, say, trouble, len(policy.recent(restarts, clock())))
            count = len(policy.recent(restarts, clock())) + 1
            drop = ", drop the page cache" if options.up.drop_caches else ""
            say(
                trouble.node,
                trouble.what,
                trouble.why,
                f"stop every rank{drop}, start the whole cluster in {delay:.0f} s "
                f"(restart {count} of at most {policy.limit} within {policy.window:.0f} s)",
            )
            _stop(cluster, options, say)
            sleep(delay)
            restarts.append(clock())
        say(None, "stopped", "the supervisor of every deployment stops", "exit")
        return Stopped("stopped with the other deployments", len(restarts))
    except (KeyboardInterrupt, Interrupted) as exc:
        signal = exc if isinstance(exc, KeyboardInterrupt) else exc.__context__  # `up` re-raises it
        why = str(signal) if isinstance(signal, Terminated) and str(signal) else "interrupted"
        say(None, "stopping", why, "stop every rank")
        _stop(cluster, options, say)
        say(None, "stopped", why, "exit")
        return Stopped(why, len(restarts))


def _asked(stopping: threading.Event | None) -> bool:
    return stopping is not None and stopping.is_set()


def _stop_a_partial_run(cluster: Cluster, options: SuperviseOptions, say: Say) -> None:
    """A run of this plan with ranks missing (one died while nobody watched) is stopped whole,
    so the first start begins afresh; another plan running is left to `up` (PlanConflict)."""
    found = status(cluster, deadline=None)
    running = [n for n in found.nodes if n.running]
    if found.state == "partial" and all(n.digest == cluster.plan.digest for n in running):
        missing = ", ".join(n.name for n in found.nodes if not n.running)
        say(None, "partial", f"this plan runs, but not on {missing}", "stop every rank, then start")
        _stop(cluster, options, say)


def _start(
    cluster: Cluster, secret_values: dict[str, str], options: SuperviseOptions, say: Say, reporter: Reporter
) -> tuple[Trouble | None, str | None]:
    """`up` (every rank, with its check): the trouble when it fails (None once it serves), and the
    run it serves (the one `up` started, else the one already running, as the head's state says)."""
    try:
        seen = _every_node_answers(cluster)
        result = up(cluster, secret_values, options.up, reporter, seen=seen)
    except (PlanConflict, Interrupted):
        raise
    except SparkLaunchError as exc:
        first = exc.message.splitlines()[0] if exc.message else type(exc).__name__
        details = tuple(exc.render().splitlines()[1:]) if isinstance(exc, Unreachable) else ()
        return Trouble(getattr(exc, "node", None), "start failed", first, exc.exit_status, details), None
    say(None, "serving", result.message, f"watch it (the watchdog every {options.interval:.0f} s)")
    return None, result.run_id or _running_run(cluster)


def _running_run(cluster: Cluster) -> str | None:
    """The run every rank runs (read strictly: a run id of the launcher's own format), or None."""
    try:
        found = {n.run_id for n in status(cluster, deadline=None).nodes}
    except SparkLaunchError:
        return None
    return found.pop() if len(found) == 1 else None


def _every_node_answers(cluster: Cluster) -> States:
    """Every node answers (a status call each, at once), else Unreachable naming every one that
    does not: `up` alone would stop at the first, the head, whose lock it takes first. What they
    said is what `up` then takes as each node's state (no node is asked twice)."""
    answers = cluster.each(lambda agent: agent.status())
    errors = {n: a for n, a in answers.items() if isinstance(a, SparkLaunchError)}
    if errors:
        raise Unreachable(errors, len(cluster.names), "nothing was started")
    return dict(answers)


def _keep_evidence(
    cluster: Cluster, secret_values: dict[str, str], trouble: Trouble, run_id: str | None, say: Say
) -> None:
    """Before any rank is stopped: every rank's stacks and log tail, into the receipt of the run
    supervise started. Whatever goes wrong here is said as an event, and supervision goes on."""
    if trouble.what == "start failed":  # `up` kept its own evidence and stopped every rank
        return
    try:
        found = capture(cluster, f"{trouble.what}: {trouble.why}", secret_values, run_id)
        kept = found.run_id is not None and add_evidence(cluster, found.run_id, found.entry)
    except Exception as exc:  # evidence is worth having, never worth ending the supervision over
        why = exc.message if isinstance(exc, SparkLaunchError) else f"{type(exc).__name__}: {exc}"
        say(trouble.node, "not captured", one_line(why), "restart without it")
        return
    receipt = f"the receipt of run {found.run_id}, and " if kept else ""
    say(trouble.node, "captured", found.said(), f"kept in {receipt}{', '.join(found.files) or 'no file'}")


def _stop(cluster: Cluster, options: SuperviseOptions, say: Say) -> None:
    """Stop every rank that answers; an event names any node that could not be reached."""
    result, unreachable = stop_reachable(cluster, options.up.grace)
    left = {n: r.remaining for n, r in result.per_node.items() if r.remaining}
    for name, error in unreachable.items():
        say(name, "cannot stop", error.reason, "it is stopped once reachable (the next start checks)")
    for name, count in left.items():
        say(name, "cannot stop", f"{count} process(es) survived SIGKILL", "look at them with ps")


def _give_up(cluster: Cluster, options: SuperviseOptions, say: Say, trouble: Trouble, count: int) -> GaveUp:
    """Stop everything and say why; GaveUp, with the last trouble's exit status, to raise."""
    policy = options.policy
    why = f"{count} restart(s) within {policy.window:.0f} s; last: {trouble.what} ({trouble.why})"
    say(trouble.node, "gave up", why, "stop every rank and exit")
    if trouble.what != "start failed":  # a failed start (`up`) left nothing running
        _stop(cluster, options, say)
    return GaveUp(
        f"cluster {cluster.spec.name}: gave up after {why}; nothing is left running",
        "`spark-launch logs SPEC -n 200` and the supervisor's event log say why; fix it, then start "
        "supervise again",
        trouble.exit_status,
        trouble.details,
    )
