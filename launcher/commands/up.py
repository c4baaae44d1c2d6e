"""`spark-launch up`: every chosen deployment checked (their memory together), started at once,
followed until each serves; then the endpoint. One deployment goes through exactly what a
one-model spec goes through (`operations.running.starting`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from launcher.core.answers.run_answer import NodeState
from launcher.core.checks import Report
from launcher.core.reports import check_summary
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import Background
from launcher.operations.drift import refuse_drift
from launcher.operations.fleet import Board, Deployments, Prefixed, each
from launcher.operations.gate import NodesDisagree, merge_reports, run_check, with_endpoint
from launcher.operations.reporter import Reporter
from launcher.operations.running.endpoint import ensure_router, route_running, stop_endpoint
from launcher.operations.running.page_cache import drop_caches
from launcher.operations.running.starting import Interrupted, States, UpOptions, UpResult, up
from launcher.operations.running.stopping import stop_reachable

__all__ = ["FleetUp", "up_fleet"]


@dataclass
class FleetUp:
    """What `up` did for each deployment, and where the endpoint serves."""

    results: dict[str, UpResult]
    endpoint: str | None
    failed: dict[str, SparkLaunchError] = field(default_factory=dict)


def up_fleet(
    deployments: Deployments, secret_values: dict[str, str], options: UpOptions, reporter: Reporter
) -> FleetUp:
    """Check every deployment to start (their memory together), start them at once, then the endpoint."""
    seen = _seen(deployments) if _looks_first(deployments, options) else {}
    starting = [n for n, states in seen.items() if not _runs(deployments.clusters[n], states)]
    if options.drop_caches:
        for name in starting:
            drop_caches(
                deployments.clusters[name], Prefixed(reporter, name) if deployments.fleet.multi else reporter
            )
    reports = _check_together(deployments, starting, options, reporter) if options.check and starting else {}
    try:
        return _start_all(deployments, secret_values, options, reporter, reports, seen)
    except KeyboardInterrupt:
        options.gate.close()  # no deployment's thread starts a rank any more
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
    seen: dict[str, States | SparkLaunchError],
) -> FleetUp:
    board = Board(reporter)
    say = board.reporter if deployments.fleet.multi else (lambda _: reporter)  # one: as it always said
    checked_options = replace(options, drop_caches=False)
    # The router is installed (where the launcher keeps it) and started beside the deployments, with
    # the routes of those starting and those that run already (it needs none of them to listen).
    others = _running_others(deployments)
    routes = [*deployments.clusters, *others]
    to_router = board.reporter("endpoint")
    endpoint = Background(lambda: _endpoint(deployments, routes, secret_values, to_router))
    outcomes = each(
        deployments.clusters,
        lambda n, c: up(c, secret_values, checked_options, say(n), reports.get(n), _states(seen.get(n))),
    )
    url = endpoint.result()
    failed = {n: r for n, r in outcomes.items() if isinstance(r, SparkLaunchError)}
    results = {n: r for n, r in outcomes.items() if isinstance(r, UpResult)}
    serving = [*results, *others]
    if deployments.endpoint is not None and serving != routes:  # a deployment failed: not offered
        url = route_running(deployments.endpoint, serving, secret_values, to_router)
    return FleetUp(results, url, failed)


def _endpoint(
    deployments: Deployments, routes: list[str], secret_values: dict[str, str], reporter: Reporter
) -> str | None:
    if deployments.endpoint is None:
        return None
    ensure_router(deployments.endpoint, reporter)
    return route_running(deployments.endpoint, routes, secret_values, reporter)


def _running_others(deployments: Deployments) -> list[str]:
    """The deployments not chosen that run their plan now: the endpoint keeps routing to them."""
    if deployments.endpoint is None or not deployments.others():
        return []
    return deployments.running_others()


def _looks_first(deployments: Deployments, options: UpOptions) -> bool:
    """Whether to ask what runs before `up` takes each deployment's lock: to check, or drop the
    caches of, only the deployments to start, and to know which to stop on Ctrl-C while several
    start (or the endpoint). Else `up` asks itself, and handles its own Ctrl-C: a call a node
    fewer before the ranks start."""
    return options.check or options.drop_caches or deployments.fleet.multi or deployments.endpoint is not None


def _seen(deployments: Deployments) -> dict[str, States | SparkLaunchError]:
    """What runs on each node of every chosen deployment: one call a node, all at once (`up`
    takes it as what it would otherwise ask the nodes without the lock)."""
    return each(deployments.clusters, lambda _, c: dict(c.each(lambda agent: agent.status())))


def _runs(cluster: Cluster, states: States | SparkLaunchError) -> bool:
    """Whether the deployment already runs its plan on every node."""
    return isinstance(states, dict) and all(
        isinstance(s, NodeState) and s.alive and s.state is not None and s.state.digest == cluster.plan.digest
        for s in states.values()
    )


def _states(found: States | SparkLaunchError | None) -> States | None:
    return found if isinstance(found, dict) else None


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
