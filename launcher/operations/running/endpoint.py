"""The endpoint on the head node: started, looked at and stopped like a rank, by the same node scripts.

Its run directory is <cluster>/endpoint beside the deployments'; its config goes there (mode
0600) before the router starts; it serves once GET /health/liveliness answers 200 on the head's
address at the endpoint's port.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from launcher.catalogs import router_lock, router_script
from launcher.core.answers.run_answer import Stopped
from launcher.core.checks import Row
from launcher.core.checks.router_rows import router_row
from launcher.core.endpoint_plan import CONFIG_FILE, LIVE_PATH, ROUTER_PIN, ROUTER_VERSION, EndpointPlan
from launcher.core.remote import Call
from launcher.core.router import install_calls, managed, routed, venv_of, version_call
from launcher.errors import SparkLaunchError
from launcher.node.agent import Agent, NotStarted
from launcher.node.cluster import new_run_id
from launcher.node.executor import Executor, NodeError
from launcher.operations.reporter import Reporter

START_SECONDS = 180.0  # the proxy imports a great deal before it listens: seconds on a busy node


class EndpointFailed(SparkLaunchError):
    """The endpoint did not come up; it was stopped."""


@dataclass
class Endpoint:
    """The endpoint's plan and its agent on the head node."""

    plan: EndpointPlan
    executor: Executor
    api_key: str | None = None

    def __post_init__(self) -> None:
        self.agent = Agent(self.executor, self.plan.cluster, self.plan.node.name)

    def http(
        self, method: str, path: str, body: bytes | None = None, timeout: float = 10.0
    ) -> tuple[int, bytes]:
        """A request to the endpoint, through the head's SSH connection."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        node = self.plan.node
        response = self.executor.http(
            node.name, self.plan.port, method, path, body, timeout, node.address, headers
        )
        return response.status, response.body

    def live(self) -> bool:
        """True when the router answers its liveness probe."""
        try:
            return self.http("GET", LIVE_PATH, timeout=5)[0] == 200
        except NodeError:
            return False

    def models(self) -> list[str]:
        """The model ids GET /v1/models lists (empty when it does not answer)."""
        try:
            status, body = self.http("GET", "/v1/models", timeout=10)
            return [str(m["id"]) for m in json.loads(body)["data"]] if status == 200 else []
        except (NodeError, ValueError, KeyError, TypeError):
            return []


def router_check(endpoint: Endpoint) -> Row:
    """Is the pinned router installed on the head? (`check` and `up` ask first; where the launcher
    keeps it, `up` installs what is missing.)"""
    return router_row(endpoint.plan, router_version(endpoint))


def router_version(endpoint: Endpoint) -> str | None:
    """The router release installed where the endpoint runs it from; None when there is none."""
    result = endpoint.agent.run(version_call(endpoint.plan))
    lines = result.stdout.strip().splitlines()
    return lines[-1] if result.ok and lines else None


def ensure_router(endpoint: Endpoint, reporter: Reporter) -> None:
    """The pinned router in the launcher's own venv on the head, installed there when it is
    missing: the lock and its install script, both shipped with the launcher, sent over SSH and
    run by the head's python3 and pip (every wheel's hash required). A venv the spec names
    (endpoint.venv) is the operator's: `check` holds it to the pin."""
    if not managed(endpoint.plan) or router_version(endpoint) == ROUTER_VERSION:
        return
    node = endpoint.plan.node.name
    reporter.info(
        f"installing the router ({ROUTER_PIN}) on {node} in {venv_of(endpoint.plan)}, from its hashed "
        "lock: once per lock"
    )
    began = time.monotonic()
    write, build = install_calls(endpoint.plan, router_lock(), router_script())
    endpoint.agent.run(write).checked(node, "sending the router's lock")
    result = endpoint.agent.run(build)
    if not result.ok:
        tail = (
            " / ".join((result.stderr or result.stdout).strip().splitlines()[-3:]) or f"exit {result.exited}"
        )
        raise EndpointFailed(
            f"could not install the router on {node}: {tail}",
            "pip on the head must reach a package index (its own configuration: PIP_INDEX_URL, or "
            "PIP_FIND_LINKS and PIP_NO_INDEX for a folder of wheels); or build it by hand "
            "(make router-venv, copied there) and set endpoint.venv",
        )
    reporter.info(f"router installed on {node} ({time.monotonic() - began:.0f} s)")


def route_running(
    endpoint: Endpoint, running: Collection[str], secret_values: dict[str, str], reporter: Reporter
) -> str | None:
    """The router serving the routes of the deployments that run, and only those: started again
    when what runs changed (its URL), stopped when nothing runs (None)."""
    if not running:
        found = endpoint.agent.status()
        if found.alive:
            reporter.info("the endpoint routes to no deployment that runs: stopping it")
            stop_endpoint(endpoint, 10)
        return None
    plan = routed(endpoint.plan, running)
    return start_endpoint(replace(endpoint, plan=plan), secret_values, reporter)


def endpoint_status(endpoint: Endpoint) -> dict[str, Any]:
    """Running or not, which plan, whether it answers, what it lists: for `status`."""
    answer = endpoint.agent.status()
    state, alive = answer.state, answer.alive
    live = alive and endpoint.live()
    return {
        "node": endpoint.plan.node.name,
        "url": endpoint.plan.url,
        "running": alive,
        "pid": state.pid if state else None,
        "plan": state.digest if state else None,
        "plan_matches": state is not None and state.digest == endpoint.plan.digest,
        "serving": live,
        "models": endpoint.models() if live else [],
    }


def start_endpoint(endpoint: Endpoint, secret_values: dict[str, str], reporter: Reporter) -> str:
    """Start the router unless it runs this plan; wait until it answers. Its URL."""
    found = endpoint.agent.status()
    digest = found.state.digest if found.state else None
    if found.alive and digest == endpoint.plan.digest:
        return endpoint.plan.url
    if found.alive:
        reporter.info(f"the endpoint runs another plan ({digest}): replacing it")
        stop_endpoint(endpoint, 10)
    reporter.info(f"starting the endpoint on {endpoint.plan.node.name} ({endpoint.plan.url})")
    directory = shlex.quote(endpoint.agent.dir)
    config = Call(
        f"umask 077 && mkdir -p {directory}/logs && cat > {directory}/{CONFIG_FILE}",
        data=endpoint.plan.config,
        timeout=30,
    )
    endpoint.agent.run(config).checked(endpoint.plan.node.name, "writing the endpoint's config")
    try:
        endpoint.agent.start(_job(endpoint.plan, secret_values))
    except NotStarted as exc:
        raise EndpointFailed(f"could not start the endpoint: {exc.reason}") from None
    _wait(endpoint)
    return endpoint.plan.url


def _job(plan: EndpointPlan, secret_values: dict[str, str]) -> dict[str, Any]:
    return {
        "container": None,
        "cluster": plan.cluster,
        "node": plan.node.name,
        "run_id": new_run_id(),
        "argv": list(plan.argv),
        "env": {**plan.env, **{k: secret_values[k] for k in plan.secrets if k in secret_values}},
        "digest": plan.digest,
    }


def _wait(endpoint: Endpoint, seconds: float = START_SECONDS) -> None:
    """Until the router answers; a router that exits or stays silent is stopped, with its log's tail."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if endpoint.live():
            return
        status = endpoint.agent.status(0)
        if not status.alive:
            tail = " / ".join((status.log or "").strip().splitlines()[-3:])
            raise EndpointFailed(f"the endpoint exited at start: {tail or 'no log'}", _HINT)
        time.sleep(1)
    stop_endpoint(endpoint, 10)
    raise EndpointFailed(f"the endpoint did not answer within {seconds:.0f} s; it was stopped", _HINT)


_HINT = (
    "`spark-launch logs SPEC --endpoint` shows its log; `spark-launch check SPEC` says whether the "
    "router is installed"
)


def stop_endpoint(endpoint: Endpoint, grace: float) -> Stopped:
    """Stop the router (ours only); the stop script's answer."""
    return endpoint.agent.stop(grace)
