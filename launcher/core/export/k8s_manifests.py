"""`spark-launch export k8s`: each planned deployment as a LeaderWorkerSet, its API Service and
the ConfigMap of its agreement gate, as plain data. Pure.

The LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) has one group of the deployment's node count:
rank 0 is the leader (it serves the API), the others are its workers, each pod running its
rank's planned argv (k8s_pods). `restartPolicy: RecreateGroupOnPodRestart`: one rank lost
restarts them all, as `supervise` does, once every pod of the group has started (LWS's
after-start annotation, v0.8 on: a pod whose gate refuses keeps its message and backs off,
instead of its group being made anew in a loop). `startupPolicy: LeaderCreated`: the leader's readiness
is its /health, which vLLM answers only once every rank has joined, so LeaderReady would wait
for ever for workers it never starts. The ConfigMap carries the gate's source and the plan's
values (`check`'s own: launcher.core.checks.probe_rows.planned_values), which each pod's init
container holds its own vLLM to.
"""

from __future__ import annotations

import json
from typing import Any

from launcher.core.checks.probe_rows import AGREE, planned_values
from launcher.core.export.k8s_checks import object_names, section_of
from launcher.core.export.k8s_endpoint import endpoint_manifest
from launcher.core.export.k8s_objects import Manifest, api_name, metadata, secret_name
from launcher.core.export.k8s_pods import (
    EXPECTED_FILE,
    GATE_FILE,
    LEADER_ADDRESS,
    LWS_NAME,
    Deployment,
    pod_template,
    shown_substitutions,
)
from launcher.core.fleet_plan import Deployed, Fleet
from launcher.core.spec.sections import SpecFile

LWS_API = "leaderworkerset.x-k8s.io/v1"
PLAN_ANNOTATION = "spark-launch/plan"
LEADER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
AFTER_START = "leaderworkerset.sigs.k8s.io/experimental-recreate-group-after-start"


def export_manifests(
    file: SpecFile, fleet: Fleet, gate_source: str, only: str | None = None
) -> list[Manifest]:
    """A Manifest per deployment (`only`: that one), then the endpoint's when every one is exported.

    `gate_source` is the gate's script as the pods run it; export_problems must have found none.
    """
    names = object_names(file)
    out = [deployment_manifest(file, d, names[d.name], gate_source) for d in fleet.select(only)]
    if only is None and fleet.endpoint is not None:
        out.append(endpoint_manifest(file, fleet, names))
    return out


def deployment_manifest(file: SpecFile, deployed: Deployed, name: str, gate_source: str) -> Manifest:
    """The ConfigMap of the gate, the LeaderWorkerSet and the API's Service of one deployment."""
    k8s = section_of(file)
    image = str(deployed.spec.vllm.image if deployed.spec.vllm.runtime == "docker" else k8s.image)
    d = Deployment(name, deployed.spec, deployed.plan, k8s, image, secret_name(file), f"{name}-plan")
    objects = (config_map(d, gate_source), leader_worker_set(d), api_service(d))
    return Manifest(name, header(d), objects)


def expected_values(d: Deployment) -> dict[str, Any]:
    """What the gate holds each pod's vLLM to: `check`'s planned values, the leader's address as LWS
    gives it."""
    settings = planned_values(d.plan)
    if "master_addr" in settings:
        settings["master_addr"] = f"$({LEADER_ADDRESS})"
    return {
        "deployment": d.spec.name,
        "plan": d.plan.digest,
        "vllm_version": d.plan.vllm_version,
        "settings": settings,
        "pins": {k: AGREE[k] for k in settings},
    }


def config_map(d: Deployment, gate_source: str) -> dict[str, Any]:
    """The gate's script and the plan's values, mounted into each pod's init container."""
    values = json.dumps(expected_values(d), indent=2, sort_keys=True) + "\n"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(d.config_map, d.name, d.k8s.namespace),
        "data": {EXPECTED_FILE: values, GATE_FILE: gate_source},
    }


def leader_worker_set(d: Deployment) -> dict[str, Any]:
    """One group: rank 0 leads (and serves the API), ranks 1.. work; one rank lost restarts all."""
    head, *rest = d.plan.nodes
    template: dict[str, Any] = {"size": len(d.plan.nodes), "restartPolicy": "RecreateGroupOnPodRestart"}
    if rest:
        template["leaderTemplate"] = pod_template(d, head, leader=True)
        template["workerTemplate"] = pod_template(d, rest[0], leader=False)
    else:  # a group of one: the worker template makes the leader
        template["workerTemplate"] = pod_template(d, head, leader=True)
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": metadata(
            d.name, d.name, d.k8s.namespace, annotations={PLAN_ANNOTATION: d.plan.digest, AFTER_START: "true"}
        ),
        "spec": {"replicas": 1, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": template},
    }


def api_service(d: Deployment) -> dict[str, Any]:
    """The leader's API, for clients in the cluster (and the endpoint)."""
    port = d.plan.api_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(api_name(d.name), d.name, d.k8s.namespace),
        "spec": {
            "selector": {LWS_NAME: d.name, LEADER_INDEX: "0"},
            "ports": [{"name": "http", "port": port, "targetPort": "http"}],
        },
    }


def header(d: Deployment) -> tuple[str, ...]:
    """The file's comment lines: what it is, what LeaderWorkerSet substitutes, what it needs."""
    lines = [
        f"spark-launch export k8s: deployment {d.spec.name}, plan {d.plan.digest}, "
        f"vLLM {d.plan.vllm_version}.",
        "Every pod runs its rank's argv and environment from `spark-launch plan` word for word,",
        "except what LeaderWorkerSet supplies (Kubernetes expands $(NAME) from the pod's variables):",
    ]
    lines += [f"  {planned:<28} -> {pod}" for planned, pod in shown_substitutions(d.plan)]
    if d.spec.secrets:
        lines.append(f"Secrets ({', '.join(d.spec.secrets)}) come from the Secret {d.secret}, by reference:")
        keys = " ".join(f"--from-literal={s}=..." for s in d.spec.secrets)
        lines.append(f"  kubectl create secret generic {d.secret} {keys}")
    lines += [
        "Before vLLM starts, each pod's init container `gate` has the pod's own vLLM resolve its",
        f"exact command and holds it to the plan ({d.config_map}); a difference stops the pod and",
        "names the settings: kubectl describe pod. Needs LeaderWorkerSet and the NVIDIA GPU operator.",
    ]
    if any(n.hca for n in d.spec.nodes) and not d.k8s.rdma_resource:
        lines.append("NCCL_IB_HCA names RoCE devices: the pods see them only with export.k8s.rdma_resource.")
    return tuple(lines)
