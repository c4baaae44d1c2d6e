"""What a spec needs before it can be exported to Kubernetes, located in the spec. Pure.

One LeaderWorkerSet writes one pod template for its workers (and one for its leader), and the
scheduler, not the spec, decides which machine runs which rank. So every node of a deployment
must be alike in what the pod carries (interface, RoCE devices, GPUs, its own env); only the
address differs, and the pod takes its own. Names must be names Kubernetes takes, and the
images must be said.
"""

from __future__ import annotations

import re

from launcher.core.fleet_plan import Fleet
from launcher.core.render import NodeCommand
from launcher.core.spec.deployments import deployment_names
from launcher.core.spec.k8s_section import WHERE, K8sSection
from launcher.core.spec.sections import Node, SpecFile
from launcher.errors import Problem

# Where endpoint_image holds the router when the spec names no endpoint.venv (on the nodes, `up`
# keeps it under the node user's home; an image has no such home).
IMAGE_ROUTER_VENV = "/opt/spark-launch-router"

# An object name LWS can derive its pods' and StatefulSets' names from (RFC 1035, room for suffixes).
NAME = re.compile(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?\Z")
NAME_HINT = "lower-case letters, digits and '-', starting with a letter, at most 40 characters"
# The per-node variables that differ by design; each pod takes VLLM_HOST_IP from its own IP.
ADDRESS = "VLLM_HOST_IP"
NODE_KEYS = {"GLOO_SOCKET_IFNAME": "interface", "NCCL_SOCKET_IFNAME": "interface", "NCCL_IB_HCA": "hca"}


def section_of(file: SpecFile) -> K8sSection:
    """The spec's export.k8s, or the defaults."""
    return (file.export.k8s if file.export else None) or K8sSection()


def object_names(file: SpecFile) -> dict[str, str]:
    """Each deployment's LeaderWorkerSet name: the cluster's, and `<cluster>-<deployment>` for several."""
    names = deployment_names(file)
    return {n: (f"{file.name}-{n}" if file.deployments else n) for n in names}


def export_problems(file: SpecFile, fleet: Fleet) -> list[Problem]:
    """Every reason the planned spec cannot be exported as it is."""
    k8s = section_of(file)
    problems = _names(file)
    if file.vllm.runtime == "venv" and k8s.image is None:
        problems.append(
            Problem(
                (*WHERE, "image"),
                "is required to export a venv spec to Kubernetes",
                f"an image holding vLLM {file.vllm.version} at {file.vllm.venv} (its pods run "
                f"{file.vllm.venv}/bin/vllm word for word)",
            )
        )
    if file.endpoint is not None and k8s.endpoint_image is None:
        hint = f"an image holding the router's venv at {file.endpoint.venv or IMAGE_ROUTER_VENV}"
        problems.append(Problem((*WHERE, "endpoint_image"), "is required to export the endpoint", hint))
    for deployed in fleet.deployments:
        problems += _alike(file, deployed.plan.nodes, deployed.spec.nodes)
    return list(dict.fromkeys(problems))


def _names(file: SpecFile) -> list[Problem]:
    problems = []
    for i, (deployment, name) in enumerate(object_names(file).items()):
        if NAME.match(name):
            continue
        where: tuple[str | int, ...] = ("deployments", i, "name") if file.deployments else ("name",)
        made = f"{name!r}" if name == deployment else f"{deployment!r} makes {name!r}, which"
        message = f"{made} cannot name a LeaderWorkerSet"
        problems.append(Problem(where, message, NAME_HINT))
    return problems


def _alike(file: SpecFile, commands: tuple[NodeCommand, ...], nodes: tuple[Node, ...]) -> list[Problem]:
    """Nodes of one deployment that differ from its first in what one pod template carries."""
    index = {n.name: i for i, n in enumerate(file.nodes)}
    first, problems = commands[0].env, []
    for command, node in zip(commands[1:], nodes[1:], strict=True):
        names = {*first, *command.env} - {ADDRESS}
        keys = sorted({NODE_KEYS.get(k, "env") for k in names if first.get(k) != command.env.get(k)})
        keys += ["gpus"] if node.gpus != nodes[0].gpus else []
        for key in keys:
            message = f"differs from {nodes[0].name}'s: one pod template runs every rank, on any machine"
            hint = f"give the deployment's nodes the same {key}"
            problems.append(Problem(("nodes", index[node.name], key), message, hint))
    return problems
