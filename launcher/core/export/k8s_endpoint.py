"""The endpoint of several deployments, exported: the planned router as a Deployment and a Service. Pure.

The router runs its planned argv and environment, with two changes that Kubernetes makes
necessary: it listens on its pod's IP (`--host` from status.podIP), and its config routes each
model to its deployment's API Service instead of a node's address.
"""

from __future__ import annotations

from typing import Any

from launcher.core.endpoint_plan import CONFIG_FILE, LIVE_PATH, EndpointPlan, Route, router_config
from launcher.core.export.k8s_checks import IMAGE_ROUTER_VENV, section_of
from launcher.core.export.k8s_objects import Manifest, api_name, metadata, secret_name
from launcher.core.export.k8s_pods import POD_IP, literal
from launcher.core.fleet_plan import Fleet
from launcher.core.router import managed
from launcher.core.spec.deployments import API_KEY
from launcher.core.spec.sections import SpecFile

CONFIG_MOUNT = "/spark-launch-endpoint"  # the router's working folder: its config, as planned


def endpoint_manifest(file: SpecFile, fleet: Fleet, names: dict[str, str]) -> Manifest:
    """The router's ConfigMap, Deployment and Service."""
    endpoint = fleet.endpoint
    assert endpoint is not None  # exported only with one
    name = f"{file.name}-endpoint"
    routes = tuple(
        Route(d.name, r.model, f"http://{api_name(names[d.name])}:{d.plan.api_port}/v1")
        for d, r in zip(fleet.deployments, endpoint.routes, strict=True)
    )
    meta = metadata(name, file.name, section_of(file).namespace)
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(f"{name}-config", file.name, section_of(file).namespace),
        "data": {CONFIG_FILE: router_config(routes, endpoint.key, API_KEY in endpoint.secrets)},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {
                    "containers": [_router(file, endpoint)],
                    "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "selector": {"app.kubernetes.io/name": name},
            "ports": [{"name": "http", "port": endpoint.port, "targetPort": "http"}],
        },
    }
    return Manifest(name, _header(file, endpoint, routes), (config, deployment, service))


def _router(file: SpecFile, endpoint: EndpointPlan) -> dict[str, Any]:
    words = [literal(w) for w in (_in_image(endpoint), *endpoint.argv[1:])]
    host = words.index("--host") + 1
    words[host] = "$(POD_IP)"
    env: list[dict[str, Any]] = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": POD_IP}}}]
    env += [{"name": k, "value": literal(v)} for k, v in endpoint.env.items()]
    secret = secret_name(file)
    env += [{"name": s, "valueFrom": {"secretKeyRef": {"name": secret, "key": s}}} for s in endpoint.secrets]
    return {
        "name": "router",
        "image": str(section_of(file).endpoint_image),
        "command": words[:1],
        "args": words[1:],
        "workingDir": CONFIG_MOUNT,
        "env": env,
        "ports": [{"name": "http", "containerPort": endpoint.port}],
        "readinessProbe": {"httpGet": {"path": LIVE_PATH, "port": "http"}, "periodSeconds": 10},
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True}],
    }


def _in_image(endpoint: EndpointPlan) -> str:
    """The router's program in endpoint_image: where the spec's endpoint.venv says, else (the
    launcher's own venv under the node user's home) IMAGE_ROUTER_VENV."""
    program = endpoint.argv[0]
    return f"{IMAGE_ROUTER_VENV}/bin/{program.rsplit('/', 1)[-1]}" if managed(endpoint) else program


def _header(file: SpecFile, endpoint: EndpointPlan, routes: tuple[Route, ...]) -> tuple[str, ...]:
    lines = [
        f"spark-launch export k8s: the endpoint of {file.name}, plan {endpoint.digest}.",
        "The router runs its planned argv and environment, except:",
        f"  --host {endpoint.node.address:<21} -> --host $(POD_IP) (downward API: status.podIP)",
    ]
    if _in_image(endpoint) != endpoint.argv[0]:
        lines.append(f"  {endpoint.argv[0]} -> {_in_image(endpoint)} (in endpoint_image)")
    for planned, exported in zip(endpoint.routes, routes, strict=True):
        lines.append(f"  route {planned.model}: {planned.url} -> {exported.url}")
    return tuple(lines)
