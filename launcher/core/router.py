"""The endpoint's router on the head node: where the launcher installs it, the calls that do, and
the routes it serves. Pure.

Where the spec names no `endpoint.venv`, the router runs from the launcher's own venv on the
head, under the node user's home and keyed by the hash of the router's lock (a new lock, a new
venv): `up` builds it there when it is missing, by sending the lock and the install script that
ship with the launcher (`launcher/catalogs/router-requirements.txt`, `router-venv.sh`: the same
install as `make router-venv`, every wheel's sha256 required). The node's own pip fetches the
wheels, from whatever index its configuration names.

The routes are those of the deployments that run: a model whose deployment is down is not
offered on /v1/models (the router is started again with the routes of what runs).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Collection

from launcher.core.endpoint_plan import ROUTER, ROUTER_VERSION, EndpointPlan, router_config
from launcher.core.remote import Call
from launcher.core.spec.deployments import API_KEY

MANAGED_ROOT = "~/.spark-launch/router"  # the launcher's own routers, under the head user's home
INSTALL_SECONDS = 1800.0  # a first install on a slow link: a hundred wheels, some large
VERSION_PROBE = "import importlib.metadata as m; print(m.version('litellm'))"


def managed_venv(lock_key: str) -> str:
    """The venv the launcher keeps the pinned router in on the head, for a lock (by its hash)."""
    return f"{MANAGED_ROOT}/{ROUTER}-{ROUTER_VERSION}-{lock_key}"


def venv_of(plan: EndpointPlan) -> str:
    """The venv the router runs from (its program's folder's parent)."""
    return plan.argv[0].rsplit("/bin/", 1)[0]


def managed(plan: EndpointPlan) -> bool:
    """True when the router runs from the launcher's own venv (the spec names no endpoint.venv)."""
    return venv_of(plan).startswith(MANAGED_ROOT + "/")


def on_node(path: str) -> str:
    """A path as the node's shell takes it: `~/` is the node user's home, the rest quoted."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def version_call(plan: EndpointPlan) -> Call:
    """The router release installed in its venv on the head (its python prints it; nothing when
    there is none)."""
    python = on_node(f"{venv_of(plan)}/bin/python")
    return Call(f"{python} -c {shlex.quote(VERSION_PROBE)} 2>/dev/null", timeout=60)


def install_calls(plan: EndpointPlan, lock: str, script: str) -> tuple[Call, Call]:
    """The lock written beside the venv, then the install script run there on it (its stdin)."""
    venv = venv_of(plan)
    requirements = f"{venv}.requirements.txt"
    folder = on_node(venv.rsplit("/", 1)[0])
    write = Call(
        f"mkdir -p {folder} && cat > {on_node(requirements)}",
        data=lock,
        timeout=60,
        about="the router's hashed lock",
    )
    build = Call(
        f"bash -s -- --venv {on_node(venv)} --requirements {on_node(requirements)}",
        data=script,
        timeout=INSTALL_SECONDS,
        about=f"router-venv.sh: {ROUTER} {ROUTER_VERSION} from the lock, every wheel's hash required",
    )
    return write, build


def routed(plan: EndpointPlan, deployments: Collection[str]) -> EndpointPlan:
    """The plan with the routes of these deployments only (those that run): its config's model
    list too, so that /v1/models offers no model that is down. Every route kept: the same plan."""
    routes = tuple(r for r in plan.routes if r.deployment in deployments)
    if routes == plan.routes:
        return plan
    config = router_config(routes, plan.key, API_KEY in plan.secrets)
    return dataclasses.replace(plan, routes=routes, config=config)
