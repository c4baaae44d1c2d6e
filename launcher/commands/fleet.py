"""Every deployment of a spec file (or the one chosen), and the endpoint: what up, down, status
and verify do for several deployments. Each deployment is a Cluster of its own and goes through
exactly what a one-model spec goes through; only the memory they share is weighed together.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from launcher.commands.caches import drop_caches
from launcher.commands.check import NodesDisagree, run_check
from launcher.commands.down import down
from launcher.commands.endpoint import Endpoint, endpoint_status, router_check, start_endpoint, stop_endpoint
from launcher.commands.lockfile import refuse_drift
from launcher.commands.reporter import Reporter
from launcher.commands.status import status
from launcher.commands.stopping import stop_reachable
from launcher.commands.up import Interrupted, UpOptions, UpResult, up
from launcher.core.checks import Report
from launcher.core.checks.memory import shared_memory_row
from launcher.core.fleet import Fleet
from launcher.core.reports import check_summary
from launcher.core.serving.state import ClusterStatus, DownResult
from launcher.errors import SparkLaunchError, SpecError
from launcher.node.cluster import Cluster, Reached

T = TypeVar("T")
C = TypeVar("C", bound=Reached)


@dataclass
class Deployments:
    """The chosen deployments as Clusters over one executor, and the endpoint (when there is one)."""

    fleet: Fleet
    clusters: dict[str, Cluster]
    endpoint: Endpoint | None
    whole: bool  # every deployment (no --deployment): the endpoint is started and stopped too

    @property
    def name(self) -> str:
        """The cluster's name."""
        return self.fleet.name

    @property
    def multi(self) -> bool:
        """Written with deployments: (else one deployment, named after the cluster)."""
        return self.fleet.multi


@dataclass
class Unplanned:
    """The chosen deployments of a spec that does not plan: their names and nodes only, over one
    executor. `down`, `status` and `logs` work from what the nodes' own state says runs."""

    name: str
    multi: bool
    clusters: dict[str, Reached]
    whole: bool
    problems: SpecError  # why the spec does not plan
    endpoint: None = None  # an endpoint's router is stopped with a spec that plans


Reachable = Deployments | Unplanned


@dataclass
class FleetUp:
    """What `up` did for each deployment, and where the endpoint serves."""

    results: dict[str, UpResult]
    endpoint: str | None
    failed: dict[str, SparkLaunchError] = field(default_factory=dict)


def each(clusters: dict[str, C], task: Callable[[str, C], T]) -> dict[str, T | SparkLaunchError]:
    """Run `task` for every chosen deployment at once; an error is that deployment's result."""

    def guarded(name: str) -> T | SparkLaunchError:
        try:
            return task(name, clusters[name])
        except SparkLaunchError as exc:
            return exc

    names = list(clusters)
    if len(names) == 1:  # in this thread: Ctrl-C reaches it as it reaches a one-model `up`
        return {names[0]: guarded(names[0])}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(guarded, names), strict=True))


def up_fleet(
    deployments: Deployments, secret_values: dict[str, str], options: UpOptions, reporter: Reporter
) -> FleetUp:
    """Check every deployment to start (their memory together), start them at once, then the endpoint."""
    starting = _not_running(deployments)
    if options.drop_caches:
        for name in starting:
            drop_caches(
                deployments.clusters[name], Prefixed(reporter, name) if deployments.fleet.multi else reporter
            )
    reports = _check_together(deployments, starting, options, reporter) if options.check and starting else {}
    try:
        return _start_all(deployments, secret_values, options, reporter, reports)
    except KeyboardInterrupt:
        reporter.info("interrupted: stopping what was started")
        for name in starting:
            stop_reachable(deployments.clusters[name], options.grace)
        if deployments.endpoint is not None and deployments.whole:
            stop_endpoint(deployments.endpoint, options.grace)
        raise Interrupted(f"interrupted; {', '.join(starting) or 'nothing'} stopped") from None


def _start_all(
    deployments: Deployments,
    secret_values: dict[str, str],
    options: UpOptions,
    reporter: Reporter,
    reports: dict[str, Report],
) -> FleetUp:
    board = Board(reporter)
    say = board.reporter if deployments.fleet.multi else (lambda _: reporter)  # one: as it always said
    checked_options = replace(options, drop_caches=False)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The router starts beside the deployments (it needs none of them to listen).
        endpoint = pool.submit(_endpoint, deployments, secret_values, board.reporter("endpoint"))
        outcomes = each(
            deployments.clusters,
            lambda n, c: up(c, secret_values, checked_options, say(n), checked=reports.get(n)),
        )
        url = endpoint.result()
    failed = {n: r for n, r in outcomes.items() if isinstance(r, SparkLaunchError)}
    results = {n: r for n, r in outcomes.items() if isinstance(r, UpResult)}
    if deployments.endpoint is not None and not results and deployments.whole:
        stop_endpoint(deployments.endpoint, options.grace)  # nothing serves behind it: leave nothing
        url = None
    return FleetUp(results, url, failed)


def _endpoint(deployments: Deployments, secret_values: dict[str, str], reporter: Reporter) -> str | None:
    return (
        None
        if deployments.endpoint is None
        else start_endpoint(deployments.endpoint, secret_values, reporter)
    )


def _not_running(deployments: Deployments) -> list[str]:
    """The chosen deployments that do not already run their plan everywhere."""
    found = each(deployments.clusters, lambda _, c: status(c, deadline=None))
    return [n for n, s in found.items() if not (isinstance(s, ClusterStatus) and s.state == "running")]


def _check_together(
    deployments: Deployments, starting: list[str], options: UpOptions, reporter: Reporter
) -> dict[str, Report]:
    """Every deployment to start is checked (its nodes alike); then what they claim of each node's
    memory together. NodesDisagree, before anything starts, when one fails or a node is over;
    else each deployment's report."""
    reporter.info(f"checking the nodes of {', '.join(starting)}")
    reports = {
        n: run_check(deployments.clusters[n], probe=options.probe, fresh=options.fresh) for n in starting
    }
    if options.locked is not None:  # the lock names what moved, before the check's verdict
        for name in starting:
            if not reports[name].unreachable:
                refuse_drift(deployments.clusters[name], options.locked, reports[name].facts)
    merged = with_endpoint(merge_reports(reports), deployments)
    if not merged.ok:
        raise NodesDisagree(merged)
    reporter.info(check_summary(merged))
    return reports


def merge_reports(reports: dict[str, Report]) -> Report:
    """One report of several deployments' checks: each row named by its deployment, then the memory
    all of them claim of a node together."""
    nodes = tuple(dict.fromkeys(n for r in reports.values() for n in r.nodes))
    if len(reports) == 1:
        return next(iter(reports.values()))
    rows = [replace(row, item=f"[{name}] {row.item}") for name, r in reports.items() for row in r.rows]
    shared = shared_memory_row({n: r.memory for n, r in reports.items()})
    return Report(nodes, (*rows, *([shared] if shared else [])))


def with_endpoint(report: Report, deployments: Deployments) -> Report:
    """The report, and (for every deployment, where there is an endpoint) the router's row."""
    if deployments.endpoint is None or not deployments.whole:
        return report
    row = router_check(deployments.endpoint)
    return replace(report, rows=(*report.rows, row))


def down_fleet(deployments: Reachable, grace: float, reporter: Reporter) -> dict[str, DownResult]:
    """Stop the chosen deployments (every one: the endpoint too), each on its own nodes."""
    results: dict[str, DownResult] = {}
    for name, cluster in deployments.clusters.items():
        results[name] = down(cluster, grace, Prefixed(reporter, name) if deployments.multi else reporter)
    if deployments.endpoint is not None and deployments.whole:
        try:
            answer = stop_endpoint(deployments.endpoint, grace)
        except SparkLaunchError as exc:
            reporter.info(f"endpoint: not stopped: {exc.message}")
            return results
        reporter.info(
            f"endpoint on {deployments.endpoint.plan.node.name}: stopped {answer.found} process(es)"
        )
        if answer.remaining:
            raise SparkLaunchError(
                "the endpoint's processes survived SIGKILL", "look at them with ps on the node"
            )
    return results


def status_fleet(deployments: Reachable, deadline: float | None) -> dict[str, Any]:
    """`status --json` of several deployments: each named, and the endpoint."""
    clusters: dict[str, Reached] = dict(deployments.clusters)
    found = each(clusters, lambda _, c: status(c, deadline))
    out: dict[str, Any] = {"cluster": deployments.name, "deployments": []}
    for name, result in found.items():
        if isinstance(result, SparkLaunchError):
            raise result
        out["deployments"].append({"deployment": name, **result.as_dict()})
    if deployments.endpoint is not None:
        out["endpoint"] = endpoint_status(deployments.endpoint)
    return out


class Prefixed:
    """A Reporter whose lines name the deployment."""

    def __init__(self, inner: Reporter, name: str) -> None:
        self.inner, self.name = inner, name

    def info(self, text: str) -> None:
        """A line of progress, prefixed."""
        self.inner.info(f"[{self.name}] {text}")

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Each node's stage, the node named with its deployment."""
        self.inner.stages({f"{self.name}/{n}": s for n, s in stages.items()}, elapsed)


class Board:
    """Several deployments starting at once: one block of every node's stage."""

    def __init__(self, inner: Reporter) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.shown: dict[str, dict[str, str]] = {}

    def reporter(self, name: str) -> Reporter:
        """The Reporter for deployment `name`."""
        board = self

        class One(Prefixed):
            def stages(self, stages: dict[str, str], elapsed: float) -> None:
                with board.lock:
                    board.shown[name] = {f"{name}/{n}": s for n, s in stages.items()}
                    merged = {k: v for d in board.shown.values() for k, v in d.items()}
                    board.inner.stages(merged, elapsed)

            def info(self, text: str) -> None:
                with board.lock:
                    super().info(text)

        return One(self.inner, name)
