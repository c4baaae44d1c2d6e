"""The pods of an exported deployment: each rank's planned argv and environment, as Kubernetes
runs them. Pure.

A pod runs the plan's words for its rank as they are: `command`/`args` lists, never a shell
line. Only what LeaderWorkerSet decides differs, and Kubernetes puts it in itself (it expands
`$(NAME)` in args from the container's variables, which LWS sets): `--master-addr` from
LWS_LEADER_ADDRESS, `--node-rank` from LWS_WORKER_INDEX, and VLLM_HOST_IP from the pod's IP
(the downward API's status.podIP). Every other `$` is doubled, so Kubernetes leaves it as
written. The docker runtime's pods run the image's entrypoint with the words after the image,
as `docker run` does; a venv spec's pods run `<venv>/bin/vllm` in the stated image.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from launcher.core.plan import Plan
from launcher.core.remote import PYTHON
from launcher.core.render import NodeCommand, runtime_prefix
from launcher.core.spec.container import CACHE_TARGET, HEADERS_TARGET
from launcher.core.spec.k8s_section import HOST, K8sSection
from launcher.core.spec.sections import Spec

LEADER_ADDRESS = "LWS_LEADER_ADDRESS"
WORKER_INDEX = "LWS_WORKER_INDEX"
POD_IP = "status.podIP"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
MULTUS = "k8s.v1.cni.cncf.io/networks"
GPU = "nvidia.com/gpu"
PLAN_MOUNT = "/spark-launch"  # the ConfigMap in the gate: the gate's source and the plan's values
GATE_FILE = "k8s_gate.py"
EXPECTED_FILE = "expected.json"
SIZES = {"b": "", "k": "Ki", "m": "Mi", "g": "Gi"}  # docker's shm_size units, as Kubernetes writes them


@dataclass(frozen=True, slots=True)
class Deployment:
    """What every pod of one exported deployment shares."""

    name: str  # the LeaderWorkerSet's
    spec: Spec
    plan: Plan
    k8s: K8sSection
    image: str
    secret: str  # the Secret holding the values of the spec's secrets
    config_map: str  # the gate's source and the plan's values


def literal(word: str) -> str:
    """A word Kubernetes passes on as written: it would expand `$(NAME)` and fold `$$`."""
    return word.replace("$", "$$")


def substitutions(plan: Plan) -> dict[str, str]:
    """Each word of the plan's argv that LeaderWorkerSet supplies in a pod, and what replaces it."""
    master = next((d.flag for d in plan.derived if d.setting == "master_addr"), None)
    out = {f"--node-rank={n.rank}": f"--node-rank=$({WORKER_INDEX})" for n in plan.nodes if n.rank_args}
    if master:
        out[master] = f"--master-addr=$({LEADER_ADDRESS})"
    return out


def shown_substitutions(plan: Plan) -> list[tuple[str, str]]:
    """The substitutions as the manifest's header lists them: (planned, in the pod)."""
    ranks = [n.rank for n in plan.nodes if n.rank_args]
    master = next((d.flag for d in plan.derived if d.setting == "master_addr"), None)
    out = [(f"--node-rank={ranks[0]}..{ranks[-1]}", f"--node-rank=$({WORKER_INDEX})")] if ranks else []
    out += [(master, f"--master-addr=$({LEADER_ADDRESS})")] if master else []
    return [*out, ("VLLM_HOST_IP=<node address>", f"the pod's IP (downward API: {POD_IP})")]


def engine_words(spec: Spec, node: NodeCommand) -> tuple[str, ...]:
    """The node's `vllm serve` words: its whole argv (venv), or what follows the image (docker)."""
    prefix = runtime_prefix(spec)
    return (*prefix[-2:], *node.argv[len(prefix) :])  # both prefixes end with `<vllm> serve`


def pod_words(spec: Spec, plan: Plan, node: NodeCommand) -> list[str]:
    """The words a pod of `node`'s rank runs, LeaderWorkerSet's values substituted."""
    swap = substitutions(plan)
    return [swap.get(w) or literal(w) for w in engine_words(spec, node)]


def pod_env(d: Deployment, node: NodeCommand) -> list[dict[str, Any]]:
    """The node's environment (docker: and the container's own --env), VLLM_HOST_IP from the pod's
    IP; the secrets by reference to the Secret, never a value."""
    values = dict(node.env)
    for word in runtime_prefix(d.spec):
        if word.startswith("--env="):
            name, _, value = word.removeprefix("--env=").partition("=")
            values[name] = value
    env: list[dict[str, Any]] = []
    for name, value in values.items():
        if name == "VLLM_HOST_IP":
            env.append({"name": name, "valueFrom": {"fieldRef": {"fieldPath": POD_IP}}})
        else:
            env.append({"name": name, "value": literal(value)})
    refs = [{"name": s, "valueFrom": {"secretKeyRef": {"name": d.secret, "key": s}}} for s in node.secrets]
    return env + refs


def gpus(d: Deployment) -> int:
    """The GPUs a pod requests: the node's (docker with gpus none: none)."""
    if d.spec.vllm.runtime == "docker" and d.spec.vllm.container.gpus == "none":
        return 0
    return d.spec.nodes[0].gpus


def container(d: Deployment, node: NodeCommand, leader: bool) -> dict[str, Any]:
    """The vLLM container of `node`'s rank."""
    words = pod_words(d.spec, d.plan, node)
    c: dict[str, Any] = {"name": "vllm", "image": d.image}
    if d.spec.vllm.runtime == "venv":
        c["command"], c["args"] = words[:1], words[1:]
    else:
        c["args"] = words  # after the image's entrypoint, as `docker run IMAGE WORDS` runs them
    c.update(_shared(d, node))
    if leader:
        c["ports"] = [{"name": "http", "containerPort": d.plan.api_port}]
        if d.plan.master_port is not None:
            c["ports"].append({"name": "rendezvous", "containerPort": d.plan.master_port})
        c["readinessProbe"] = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10}
    return c


def gate_container(d: Deployment, node: NodeCommand) -> dict[str, Any]:
    """The init container: the pod's own vLLM resolves the pod's very argv, held to the plan."""
    words = pod_words(d.spec, d.plan, node)
    gate = [f"{PLAN_MOUNT}/{GATE_FILE}", f"{PLAN_MOUNT}/{EXPECTED_FILE}", "--", *words[2:]]
    c: dict[str, Any] = {"name": "gate", "image": d.image}
    if d.spec.vllm.runtime == "venv":
        c["command"], c["args"] = [f"{d.spec.vllm.venv}/bin/python"], gate
    else:
        c["args"] = [PYTHON, *gate]  # as the probe runs in the image: after its entrypoint
    shared = _shared(d, node)
    mounts = [*shared.pop("volumeMounts"), {"name": "plan", "mountPath": PLAN_MOUNT, "readOnly": True}]
    return {**c, **shared, "volumeMounts": mounts}


def _shared(d: Deployment, node: NodeCommand) -> dict[str, Any]:
    """What the gate and vLLM share: environment, devices, limits, volumes."""
    limits: dict[str, Any] = {GPU: gpus(d)} if gpus(d) else {}
    if d.k8s.rdma_resource:
        limits[d.k8s.rdma_resource] = 1
    out: dict[str, Any] = {"env": pod_env(d, node)}
    if limits:
        out["resources"] = {"limits": limits}
    if any(n.hca for n in d.spec.nodes):  # RDMA pins memory: docker's memlock=-1, as a capability
        out["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    mounts = [
        {"name": "model", "mountPath": model_mount(d), "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    if _cache(d):
        mounts += [{"name": "compile-cache", "mountPath": p} for p in (CACHE_TARGET, HEADERS_TARGET)]
    out["volumeMounts"] = mounts
    return out


def model_mount(d: Deployment) -> str:
    """Where the model's volume appears: the same path as on the nodes."""
    return d.k8s.model_mount or d.spec.model.path


def _cache(d: Deployment) -> bool:
    return d.spec.vllm.runtime == "docker" and d.spec.vllm.container.compile_cache != "none"


def volumes(d: Deployment) -> list[dict[str, Any]]:
    """The model (hostPath or a claim), /dev/shm in memory, the plan's ConfigMap, the compile cache."""
    if d.k8s.model_claim:
        model: dict[str, Any] = {"persistentVolumeClaim": {"claimName": d.k8s.model_claim, "readOnly": True}}
    else:
        model = {"hostPath": {"path": model_mount(d), "type": "Directory"}}
    shm: dict[str, Any] = {"medium": "Memory"}
    size = d.spec.vllm.container.shm_size if d.spec.vllm.runtime == "docker" else None
    if size:
        shm["sizeLimit"] = size[:-1] + SIZES[size[-1].lower()] if size[-1].isalpha() else size
    out = [{"name": "model", **model}, {"name": "dshm", "emptyDir": shm}]
    out.append({"name": "plan", "configMap": {"name": d.config_map}})
    return out + ([{"name": "compile-cache", "emptyDir": {}}] if _cache(d) else [])


def pod_template(d: Deployment, node: NodeCommand, leader: bool) -> dict[str, Any]:
    """The pod of `node`'s rank: the gate, then vLLM, on the fabric, one pod per machine."""
    metadata: dict[str, Any] = {
        "labels": {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/part-of": d.name}
    }
    spec: dict[str, Any] = {}
    if d.k8s.network == HOST:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"  # LWS_LEADER_ADDRESS is a cluster DNS name
    else:
        metadata["annotations"] = {MULTUS: multus(d.k8s.network, d.spec.nodes[0].interface)}
    # Each rank on a machine of its own, as each node of the spec is.
    spread = {"labelSelector": {"matchLabels": {LWS_NAME: d.name}}, "topologyKey": "kubernetes.io/hostname"}
    spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [spread]}}
    spec["initContainers"] = [gate_container(d, node)]
    spec["containers"] = [container(d, node, leader)]
    spec["volumes"] = volumes(d)
    return {"metadata": metadata, "spec": spec}


def multus(network: str, interface: str) -> str:
    """The Multus selection: the fabric's network, under the interface name the plan's NCCL_SOCKET_IFNAME
    and GLOO_SOCKET_IFNAME give."""
    namespace, _, name = network.rpartition("/")
    selection = {"name": name, **({"namespace": namespace} if namespace else {}), "interface": interface}
    return json.dumps([selection])
