"""The spec's `export.k8s` section: what Kubernetes needs that the nodes' spec does not say. Pure.

`spark-launch export k8s` hands the checked plan to Kubernetes. The plan already holds every
command, variable and port; this section adds only what a cluster asks for besides: the image
a venv spec's pods run, where the pods' fabric comes from, the model's volume, the Secret
holding the values of `secrets:`, and the RoCE devices' resource. The GPUs a pod requests are
the nodes' own `gpus` (the plan checked the parallel sizes against them).
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.spec.schema import doc

WHERE = ("export", "k8s")
HOST = "host"


@dataclass(frozen=True, slots=True)
class K8sSection:
    """`spark-launch export k8s`: what the LeaderWorkerSet's pods need besides the plan."""

    image: str | None = doc(
        "venv runtime: the container image holding vLLM at vllm.venv's very path (the pods run "
        "<venv>/bin/vllm word for word); the docker runtime's pods run vllm.image",
        default=None,
    )
    namespace: str | None = doc(
        "the namespace of every object (default: kubectl's current one)", default=None
    )
    network: str = doc(
        "host: each pod on its node's own network, as spark-launch runs vLLM; else the Multus "
        "NetworkAttachmentDefinition ([namespace/]name) of the fabric, attached under the nodes' "
        "interface name",
        default=HOST,
    )
    model_claim: str | None = doc(
        "a PersistentVolumeClaim holding the model, mounted read-only at model_mount "
        "(default: the node's own folder, as a hostPath volume)",
        default=None,
    )
    model_mount: str | None = doc(
        "the folder mounted into every pod at the same path, holding each model.path "
        "(default: the model's own folder)",
        default=None,
    )
    secret: str | None = doc(
        "the Kubernetes Secret holding one key per name under secrets: (default: <cluster>-secrets)",
        default=None,
    )
    rdma_resource: str | None = doc(
        "the device plugin resource that gives a pod the RoCE devices of nodes[].hca, one per pod "
        "(the NVIDIA Network Operator's shared RDMA device plugin: rdma/rdma_shared_device_a)",
        default=None,
    )
    endpoint_image: str | None = doc(
        "with an endpoint: the container image holding the router's venv at endpoint.venv's path "
        "(none written: /opt/spark-launch-router)",
        default=None,
    )


@dataclass(frozen=True, slots=True)
class ExportSection:
    """How other tools run this spec's deployments."""

    k8s: K8sSection | None = doc(
        "Kubernetes: `spark-launch export k8s` writes a LeaderWorkerSet per deployment", default=None
    )
