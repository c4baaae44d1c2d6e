"""`spark-launch supervise`: keep every chosen deployment serving, one supervisor each, and one
for the endpoint.

Each deployment is supervised exactly as a one-model spec is (`operations.running.supervising`:
its own ranks, its own watchdog, its own restarts and limit); a trouble in one restarts that one
only. The
endpoint is looked at every interval and started again when it is gone or does not answer.
Asked to stop (SIGTERM, Ctrl-C), every supervisor ends and every deployment and the endpoint
are stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from launcher.core.serving.supervision import Event
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.operations.fleet import Deployments, Prefixed
from launcher.operations.reporter import Reporter
from launcher.operations.running.endpoint import Endpoint, ensure_router, start_endpoint, stop_endpoint
from launcher.operations.running.stopping import stop_reachable
from launcher.operations.running.supervising import Say, Stopped, SuperviseOptions, supervise


def supervise_fleet(
    deployments: Deployments,
    secret_values: dict[str, str],
    options: SuperviseOptions,
    emit: Callable[[Event], None],
    reporter: Reporter,
) -> Stopped:
    """Supervise every chosen deployment (and the endpoint) until asked to stop, then stop them all."""
    stopping = threading.Event()
    lock = threading.Lock()

    def said(event: Event) -> None:
        with lock:
            emit(event)

    workers = [
        threading.Thread(
            target=_keep_one,
            args=(cluster, secret_values, options, said, Prefixed(reporter, name), stopping),
            daemon=True,
        )
        for name, cluster in deployments.clusters.items()
    ]
    if deployments.endpoint is not None:
        keeper = (deployments.endpoint, secret_values, options, Say(deployments.fleet.name, said), reporter)
        workers.append(threading.Thread(target=_keep_endpoint, args=(*keeper, stopping), daemon=True))
    for worker in workers:
        worker.start()
    try:
        while any(w.is_alive() for w in workers):
            time.sleep(0.5)
        return Stopped("every supervisor ended", 0)
    except KeyboardInterrupt as exc:
        stopping.set()
        _stop_all(deployments, options.up.grace)
        for worker in workers:
            worker.join(60)
        return Stopped(str(exc) or "interrupted", 0)


def _keep_one(
    cluster: Cluster,
    secret_values: dict[str, str],
    options: SuperviseOptions,
    emit: Callable[[Event], None],
    reporter: Reporter,
    stopping: threading.Event,
) -> None:
    """One deployment's supervisor; a GaveUp ends it (its events say why), the others go on."""

    def nap(seconds: float) -> None:  # a back-off that ends when every supervisor is asked to stop
        stopping.wait(seconds)

    try:
        supervise(cluster, secret_values, options, emit, reporter, sleep=nap, stopping=stopping)
    except SparkLaunchError as exc:
        reporter.info(exc.render())


def _keep_endpoint(
    endpoint: Endpoint,
    secret_values: dict[str, str],
    options: SuperviseOptions,
    say: Say,
    reporter: Reporter,
    stopping: threading.Event,
) -> None:
    """Start the endpoint, then look at it every interval; start it again when it is gone."""
    restarts: list[float] = []
    node = endpoint.plan.node.name
    try:
        ensure_router(endpoint, reporter)  # where the launcher keeps the router: installed if missing
        start_endpoint(endpoint, secret_values, reporter)
        say(node, "serving", endpoint.plan.url, f"watch it (every {options.interval:.0f} s)")
    except SparkLaunchError as exc:
        say(node, "start failed", exc.message, "try again at the next look")
    while not stopping.wait(options.interval):
        try:
            if not (endpoint.agent.status().alive and endpoint.live()):
                say(node, "endpoint down", "not running or not answering", "start it again")
                delay = options.policy.delay(restarts, time.monotonic())
                if delay is None:
                    say(node, "gave up", "the endpoint keeps failing", "stop it")
                    stop_endpoint(endpoint, options.up.grace)
                    return
                stop_endpoint(endpoint, options.up.grace)
                if stopping.wait(delay):
                    return
                start_endpoint(endpoint, secret_values, reporter)
                restarts.append(time.monotonic())
                say(node, "serving", endpoint.plan.url, "watch it")
        except SparkLaunchError as exc:
            say(node, "endpoint trouble", exc.message, "look again")


def _stop_all(deployments: Deployments, grace: float) -> None:
    """Stop every chosen deployment's ranks and the endpoint, at once."""
    threads = [
        threading.Thread(target=stop_reachable, args=(c, grace), daemon=True)
        for c in deployments.clusters.values()
    ]
    if deployments.endpoint is not None:
        threads.append(
            threading.Thread(target=stop_endpoint, args=(deployments.endpoint, grace), daemon=True)
        )
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(grace + 60)
