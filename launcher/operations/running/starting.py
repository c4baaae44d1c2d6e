"""Starting one cluster (`up`, and `supervise` at every restart): check, start every rank, follow
them all until the head serves a completion.

It never leaves a half-started cluster behind: a rank that exits, a lost node, a time-out
or Ctrl-C stops every node that answers (and names any that could not be reached).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from launcher.core.answers.run_answer import NodeState, RunState
from launcher.core.checks import Report
from launcher.core.receipts.lockfile import Lock
from launcher.core.remote import node_job
from launcher.core.reports import check_summary
from launcher.core.serving.startup_log import Diagnosis, NodeWatch, diagnose
from launcher.errors import ExitStatus, SparkLaunchError
from launcher.node.agent import Agent
from launcher.node.cluster import Cluster, Hold, Unreachable, new_run_id
from launcher.node.executor import Background, NodeError, fan_out
from launcher.operations.drift import refuse_drift
from launcher.operations.evidence import capture
from launcher.operations.gate import NodesDisagree, run_check
from launcher.operations.gathering.gather_inputs import gathered
from launcher.operations.receipt_store import Run, record_run
from launcher.operations.reporter import Reporter
from launcher.operations.running.following import Exited, Lost, Served, TimedOut, drain, follow
from launcher.operations.running.head_health import LOST_AFTER_SECONDS, complete
from launcher.operations.running.page_cache import drop_caches
from launcher.operations.running.stopping import stop_all, stop_reachable

__all__ = ["Interrupted", "PlanConflict", "StartGate", "StartupFailed", "UpOptions", "UpResult", "up"]
States = dict[str, NodeState | SparkLaunchError | None]  # what each node said runs there (None: unknown)


class PlanConflict(SparkLaunchError):
    """The cluster runs something other than this plan."""


class Interrupted(SparkLaunchError):
    """Ctrl-C: what was started has been stopped."""

    exit_status = ExitStatus.INTERRUPTED


class StartupFailed(SparkLaunchError):
    """A rank died, or the cluster did not serve in time; everything was stopped."""

    def __init__(self, message: str, hint: str | None, details: list[str]) -> None:
        super().__init__(message, hint)
        self.details = details

    def render(self) -> str:
        """The failure, the evidence, then the hint."""
        body = "\n".join([self.message, *self.details])
        return body + (f"\n  hint: {self.hint}" if self.hint else "")


class StartGate:
    """Where the ranks of a start are begun. Ctrl-C reaches only the main thread: with several
    deployments starting at once in threads of their own, `up` closes the gate, which waits for a
    start under way to end (so the stop that follows sees what it began) and lets none begin after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.closed = False

    @contextmanager
    def starting(self) -> Iterator[None]:
        """Begin a start, unless the gate is closed (then Interrupted)."""
        with self._lock:
            if self.closed:
                raise Interrupted("interrupted before it started")
            yield

    def close(self) -> None:
        """No start begins from now on; one under way has ended when this returns."""
        with self._lock:
            self.closed = True


@dataclass(frozen=True, slots=True)
class UpOptions:
    """How `up` behaves."""

    timeout: float = 900.0
    wait: bool = True
    replace: bool = False
    grace: float = 15.0
    check: bool = True
    probe: bool = True
    fresh: bool = False
    collective: bool = True  # the collective preflight, in the check
    lost_after: float = LOST_AFTER_SECONDS  # a node not heard from this long is lost
    drop_caches: bool = False  # sync and drop the page cache on every node before the check
    locked: Lock | None = None  # refuse to start when a node differs from this lock file
    gate: StartGate = field(default_factory=StartGate, compare=False)  # shared by a fleet's starts


@dataclass(frozen=True, slots=True)
class UpResult:
    """What `up` did."""

    started: bool
    run_id: str | None
    seconds: float
    url: str
    model: str | None
    message: str


def up(
    cluster: Cluster,
    secret_values: dict[str, str],
    options: UpOptions,
    reporter: Reporter,
    checked: Report | None = None,
    seen: States | None = None,
) -> UpResult:
    """Start the plan on every node and wait until the head serves (or fail cleanly).

    `checked`: the check's report when the caller ran it already (with the other deployments
    sharing the nodes); it goes into the receipt as the check `up` ran itself would. `seen`:
    what each node said runs there, asked by the caller before (`_running` says when that
    stands). Each node costs one call before its rank starts, and the head two (`_held`).
    """
    run_id = new_run_id()
    starts: list[str] = []  # the run, once its ranks may have started
    try:
        with _held(cluster, run_id, seen) as (hold, states):
            conflict = _conflict(cluster, _running(cluster, states), options, reporter)
            if conflict is not None:
                return conflict
            if options.drop_caches:
                drop_caches(cluster, reporter)
            # a report checked by the caller was held to the lock there (up_fleet's shared check)
            report = checked if checked is not None else _check_first(cluster, options, reporter)

            def start(run: Run) -> UpResult:
                starts.append(run.run_id)
                return _start_and_wait(cluster, secret_values, options, reporter, run, hold)

            # the receipt rides with the head's start, then with the lock's release
            return record_run(cluster, report, secret_values, start, run_id, hold.leave)
    except KeyboardInterrupt:  # outside the wait (which stops what it started itself)
        if not starts:
            raise Interrupted("interrupted before anything was started") from None
        reporter.info("interrupted: stopping what was started")
        raise Interrupted(f"interrupted; {_stop_what_answers(cluster, options)}") from None


def _conflict(
    cluster: Cluster, existing: dict[str, NodeState], options: UpOptions, reporter: Reporter
) -> UpResult | None:
    """What runs already: nothing to do (this very plan everywhere), a PlanConflict, or (with
    --replace) stopped; None when the ranks are to be started."""
    if not existing:
        return None
    digests = {s.state.digest for s in existing.values() if s.state}
    if len(existing) == len(cluster.names) and digests == {cluster.plan.digest}:
        return UpResult(
            False,
            None,
            0.0,
            _url(cluster),
            None,
            f"cluster {cluster.spec.name} already runs plan {cluster.plan.digest}: nothing to do",
        )
    if not options.replace:
        raise PlanConflict(
            f"cluster {cluster.spec.name} is already running on {', '.join(sorted(existing))} "
            f"(plan {', '.join(sorted(digests)) or '?'}), and this plan is {cluster.plan.digest}",
            "`spark-launch up --replace` restarts it with this plan; `spark-launch down` stops it",
        )
    reporter.info(f"--replace: stopping the running cluster on {', '.join(sorted(existing))}")
    stop_all(cluster, options.grace)
    return None


def _check_first(cluster: Cluster, options: UpOptions, reporter: Reporter) -> Report | None:
    """Refuse to start nodes that are not alike (the whole point: fail before loading weights),
    or that differ from the lock file (--locked); the check's report, for the receipt."""
    if not options.check:
        reporter.info(
            "WARNING: --skip-check: starting without checking that the nodes are alike; a "
            "difference may only show after the weights load, or as a hang"
        )
        if options.locked is not None:
            refuse_drift(cluster, options.locked, gathered(cluster))
        return None
    doing = [
        *(["a collective across the fabric"] if options.collective else []),
        *(["each node's own vLLM resolving its command"] if options.probe else []),
    ]
    reporter.info("checking the nodes" + (f" ({', then '.join(doing)})" if doing else ""))
    report = run_check(cluster, probe=options.probe, fresh=options.fresh, collective=options.collective)
    if options.locked is not None and not report.unreachable:  # the lock names what moved
        refuse_drift(cluster, options.locked, report.facts)
    if not report.ok:
        raise NodesDisagree(report)
    reporter.info(check_summary(report))
    return report


@contextmanager
def _held(cluster: Cluster, run_id: str, seen: States | None) -> Iterator[tuple[Hold, States]]:
    """The cluster's lock, taken by the call that also says what runs on the head; and what runs
    on every other node: from `seen`, else asked meanwhile (each node one call, all at once)."""
    others = [n for n in cluster.names if n != cluster.head_name]
    asked = (
        None
        if seen is not None
        else Background(lambda: fan_out(others, lambda n: cluster.agents[n].status()))
    )
    with cluster.locked("up", run_id, status=True) as hold:
        found: States = dict(seen or {}) if asked is None else dict(asked.result())
        yield hold, {cluster.head_name: hold.state, **{n: found.get(n) for n in others}}


def _running(cluster: Cluster, states: States) -> dict[str, NodeState]:
    """Nodes with a live process of ours; an unreachable node is an error here.

    The head's state was read under the lock; the others' may have been read before it was
    taken. They stand when nothing runs anywhere: a node started since could only have been
    started by a launcher holding the lock meanwhile, which released it with the head running
    too (seen here) or with every node stopped. Otherwise every node is asked again, now.
    """
    statuses = dict(states)
    if any(not isinstance(s, NodeState) or s.alive for s in statuses.values()):
        statuses = dict(cluster.each(lambda agent: agent.status()))
    errors = {n: s for n, s in statuses.items() if isinstance(s, SparkLaunchError)}
    if errors:  # every one named: fixing SSH node by node, one run each, is the slow way
        raise Unreachable(errors, len(cluster.names), "nothing was started")
    return {name: s for name, s in statuses.items() if isinstance(s, NodeState) and s.alive}


def _start_and_wait(
    cluster: Cluster,
    secret_values: dict[str, str],
    options: UpOptions,
    reporter: Reporter,
    run: Run,
    hold: Hold,
) -> UpResult:
    run_id = run.run_id
    began = time.monotonic()
    reporter.info(
        f"starting {cluster.spec.name} (plan {cluster.plan.digest}, run {run_id}) "
        f"on {len(cluster.names)} node(s)"
    )
    commands = {n.name: n for n in cluster.plan.nodes}

    def start(agent: Agent) -> RunState:
        job = node_job(cluster.spec, cluster.plan, commands[agent.node], run_id, secret_values)
        return agent.start(job, hold.parcel() if agent.node == cluster.head_name else None)

    try:
        with options.gate.starting():
            _start_all(cluster, start, options)
        if not options.wait:
            return UpResult(
                True,
                run_id,
                time.monotonic() - began,
                _url(cluster),
                None,
                f"started {cluster.spec.name} (not waiting: see `spark-launch status`)",
            )
        model = _wait(cluster, options, reporter, began, run)
    except KeyboardInterrupt:
        reporter.info("interrupted: stopping what was started")
        raise Interrupted(f"interrupted; {_stop_what_answers(cluster, options)}") from None
    seconds = time.monotonic() - began
    return UpResult(
        True,
        run_id,
        seconds,
        _url(cluster),
        model,
        f"{cluster.spec.name} serves {model} at {_url(cluster)} ({seconds:.1f} s)",
    )


def _start_all(cluster: Cluster, start: Callable[[Agent], RunState], options: UpOptions) -> None:
    """Start every rank at once; if any did not start (for any reason), stop every one that did."""
    try:
        started = cluster.each(start, finish=True)  # Ctrl-C: every start under way ends first
    except Exception:  # not a node's error (those are values): still nothing left half-started
        _stop_what_answers(cluster, options)
        raise
    failed = {n: s for n, s in started.items() if isinstance(s, SparkLaunchError)}
    if failed:
        left = _stop_what_answers(cluster, options)
        name, why = next(iter(failed.items()))
        reason = why.reason if isinstance(why, NodeError) and why.node == name else why.message
        raise StartupFailed(f"could not start on {name}: {reason}", left, [])


def _stop_what_answers(cluster: Cluster, options: UpOptions) -> str:
    """Stop every node that answers; say so, and name the ones that did not."""
    _, unreachable = stop_reachable(cluster, options.grace)
    if not unreachable:
        return "every node was stopped"
    return f"every other node was stopped; could not reach {', '.join(sorted(unreachable))} to stop it"


def _url(cluster: Cluster) -> str:
    """Where the API serves: the address it binds (127.0.0.1: on the head itself), the head's
    address for every interface."""
    listen = cluster.plan.api_listen
    host = cluster.head.address if listen in ("0.0.0.0", "::") else listen
    return f"http://{f'[{host}]' if ':' in host else host}:{cluster.plan.api_port}/v1"


def _wait(cluster: Cluster, options: UpOptions, reporter: Reporter, began: float, run: Run) -> str | None:
    """Follow every rank until the head serves; on any other outcome stop every node and say why."""
    watches = {n.name: NodeWatch(n.name, n.rank) for n in cluster.plan.nodes}
    outcome = follow(cluster, watches, reporter, options.timeout, options.lost_after)
    if isinstance(outcome, Served):
        model = _served_model(cluster)
        if model is not None:
            _first_completion(cluster, model, options, reporter, began)
        return model
    if isinstance(outcome, Exited):
        _fail(cluster, watches, outcome, options, reporter, run)
    left = _stop_what_answers(cluster, options)
    if isinstance(outcome, Lost):
        raise NodeError(
            outcome.node,
            f"lost while waiting ({outcome.reason}); {left}",
            "`spark-launch down` once the node answers again stops what may still run there",
        )
    assert isinstance(outcome, TimedOut)
    where = ", ".join(f"{n} at '{w.stage_name}'" for n, w in watches.items())
    raise StartupFailed(
        f"{cluster.spec.name} did not serve within {options.timeout:.0f} s ({where}); {left}",
        "`spark-launch logs` shows why, or raise --timeout",
        [],
    )


def _first_completion(
    cluster: Cluster, model: str, options: UpOptions, reporter: Reporter, began: float
) -> None:
    """Only a completion proves it serves (/health is 200 on an engine whose completions fail or
    hang): one token, within what is left of the timeout; the first request may compile kernels."""
    reporter.info("the API is up: sending a first completion (the first request may compile kernels)")
    done = complete(cluster, model, max(30.0, options.timeout - (time.monotonic() - began)))
    if done.ok:
        return
    left = _stop_what_answers(cluster, options)
    how = f"did not finish within {done.seconds:.0f} s" if done.timed_out else f"failed: {done.error}"
    raise StartupFailed(
        f"{cluster.spec.name} answers /health, but its first completion {how}; {left}",
        "`spark-launch logs SPEC -n 200` shows why (the CPU build compiles kernels at the first request "
        "and needs a C++ compiler for it)",
        [],
    )


def _served_model(cluster: Cluster) -> str | None:
    try:
        return str(cluster.served_model()["id"])
    except NodeError:
        return None


def _fail(
    cluster: Cluster,
    watches: dict[str, NodeWatch],
    exited: Exited,
    options: UpOptions,
    reporter: Reporter,
    run: Run,
) -> None:
    """A rank exited: say so at once, keep the evidence, stop everything, then say which, how and
    (when known) why."""
    watch = watches[exited.node]
    what = f"{exited.node} (rank {watch.rank}) exited with status {exited.code} after {exited.seconds:.0f} s"
    reporter.info(f"{what}, at '{watch.stage_name}': capturing every rank's stacks, then stopping every node")
    run.add(capture(cluster, what, run.secrets, run.run_id).entry)
    left = _stop_what_answers(cluster, options)
    drain(cluster, watches)
    found: Diagnosis | None = diagnose(watch.text, exited.code)
    for other in watches.values():  # the cause may be in another rank's log
        found = found or diagnose(other.text)
    details = [f"  last lines of {exited.node}'s log:", *(f"    {line[:240]}" for line in watch.tail[-15:])]
    if found:
        details += [f"  diagnosis: {found.title}", f"  evidence:  {found.evidence}"]
    raise StartupFailed(
        f"{what}, at '{watch.stage_name}'; {left}",
        found.hint if found else "`spark-launch logs SPEC -n 200` shows the whole log",
        details,
    )
