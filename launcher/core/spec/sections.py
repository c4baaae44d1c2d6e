"""The deployment spec: one YAML file, validated at the boundary into frozen values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from launcher.core.spec.container import ContainerSection
from launcher.core.spec.k8s_section import ExportSection
from launcher.core.spec.schema import EnvValue, JsonValue, doc, json_schema

ModelKind = Literal["decoder", "hybrid", "attention-free", "pooling", "encoder-decoder"]


@dataclass(frozen=True, slots=True)
class VllmSection:
    """Which vLLM runs on the nodes, and how it is installed there."""

    version: str = doc(
        "the vLLM version installed on every node, as it reports it (any PEP 440 version): "
        "0.33.0, 0.33.0+cu130, 0.34.0rc1, 0.33.1.dev45+g7ee8a6dd0; `init` writes it"
    )
    runtime: Literal["venv", "docker"] = doc("venv (runs <venv>/bin/vllm) or docker", default="venv")
    venv: str | None = doc("venv runtime: the virtual environment holding vLLM", default=None)
    image: str | None = doc(
        "docker runtime: the container image holding vLLM; pin it by digest (name@sha256:...)",
        default=None,
    )
    container: ContainerSection = doc(
        "docker runtime: IPC, GPUs and limits of the containers (the defaults suit a DGX Spark)",
        default_factory=ContainerSection,
    )
    flags_from: str | None = doc(
        "use this supported release's flags instead of the ones learned from the nodes' own "
        "vLLM, at your own risk",
        default=None,
    )


@dataclass(frozen=True, slots=True)
class Node:
    """One machine; the first node listed is rank 0 and serves the API."""

    name: str = doc("short node name used in output, logs and state")
    ssh: str = doc("ssh_config alias, or user@host[:port]")
    address: str = doc("the node's fabric IP: VLLM_HOST_IP; rank 0's is --master-addr")
    interface: str = doc("fabric interface: NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME")
    hca: tuple[str, ...] = doc("RoCE devices of that port: NCCL_IB_HCA", default=())
    gpus: int = doc("GPUs on this node (a DGX Spark has one)", default=1)
    memory_gib: float | None = doc(
        "the memory vLLM's share is taken of, in GiB, as `check` shows it: the system's MemTotal on "
        "unified memory (a DGX Spark: the GPU has none of its own), else one GPU's memory. The "
        "plan divides it among the deployments on the node; unset: a 128 GB DGX Spark's 121.7",
        default=None,
    )
    env: dict[str, EnvValue] = doc(
        "per-node environment that is not an engine input (no VLLM_* here)", default_factory=dict
    )


@dataclass(frozen=True, slots=True)
class ModelSection:
    """The model, at the same path on every node."""

    path: str = doc("absolute path of the model directory, the same on every node")
    served_name: str | None = doc("name the API serves the model as", default=None)
    kind: ModelKind | None = doc(
        "what kind of model vLLM builds, for planning where its config.json is not readable "
        "(`check` and `up` read it from the head node): decoder (generative, attention only), "
        "hybrid (mamba or linear attention mixed with attention), attention-free (mamba only), "
        "pooling (embeddings, scores), encoder-decoder. Where the plan reads config.json, it "
        "must agree with vLLM's own registry",
        default=None,
    )
    hybrid: bool | None = doc(
        "older form of model.kind: true means kind hybrid; false only says the model is not "
        "hybrid, which settles nothing that depends on its kind (write model.kind instead)",
        default=None,
    )


LISTEN_WORDS = ("loopback", "fabric", "all")


@dataclass(frozen=True, slots=True)
class ApiSection:
    """Where each deployment's API (vLLM's HTTP server, on its rank 0) listens: vLLM's --host."""

    listen: str | None = doc(
        "loopback (127.0.0.1: only the launcher, through SSH, and an endpoint on the same node "
        "reach it), fabric (the rank 0 node's address), all (0.0.0.0: every interface), or an IP "
        "address of the rank 0 node (its address on the clients' network, say); unset: loopback "
        "behind an endpoint on the same node, else the rank 0 node's address",
        default=None,
    )


@dataclass(frozen=True, slots=True)
class Spec:
    """A whole vLLM deployment across several nodes."""

    name: str = doc("cluster name (state, logs, process labels)")
    vllm: VllmSection = doc("the vLLM release and runtime")
    nodes: tuple[Node, ...] = doc("the machines; the first is rank 0")
    model: ModelSection = doc("the model to serve")
    serve: dict[str, JsonValue] = doc(
        "`vllm serve` options as snake_case keys, identical on all nodes", default_factory=dict
    )
    env: dict[str, EnvValue] = doc("environment identical on all nodes", default_factory=dict)
    secrets: tuple[str, ...] = doc(
        "names of variables passed from the launcher's environment, never shown", default=()
    )
    ssh_config: str | None = doc("ssh_config file to use instead of ~/.ssh/config", default=None)
    api: ApiSection = doc("where the API listens", default_factory=ApiSection)
    endpoint_node: str | None = doc(
        "the node running the file's endpoint (set from the file; None: no endpoint)", default=None
    )

    @property
    def head(self) -> Node:
        """Rank 0, the node serving the API."""
        return self.nodes[0]


@dataclass(frozen=True, slots=True)
class DeploymentSection:
    """One model served on some of the nodes: planned, checked, started and supervised on its own."""

    name: str = doc("the deployment's name (`--deployment NAME`, state, logs)")
    nodes: tuple[str, ...] = doc("names of the top-level nodes it runs on; the first is its rank 0")
    model: ModelSection = doc("the model this deployment serves")
    serve: dict[str, JsonValue] = doc(
        "`vllm serve` options as snake_case keys, identical on this deployment's nodes", default_factory=dict
    )


@dataclass(frozen=True, slots=True)
class EndpointSection:
    """One OpenAI-compatible endpoint on the head node, routing each request by its `model`."""

    port: int = doc("the port the endpoint listens on, at the head node's address")
    venv: str | None = doc(
        "a virtual environment on the head node holding the pinned router, built by hand "
        "(`make router-venv` builds one); default: `up` builds it on the head, under "
        "~/.spark-launch/router/",
        default=None,
    )
    key: str | None = doc(
        "the name, under secrets:, of the endpoint's client key (the router's master key): "
        "clients send it as `Authorization: Bearer KEY`; never VLLM_API_KEY, the deployments' own",
        default=None,
    )
    auth: Literal["key", "none"] = doc(
        "key: every request needs endpoint.key; none: the endpoint takes requests without a key "
        "(validate and up warn)",
        default="key",
    )


@dataclass(frozen=True, slots=True)
class SpecFile:
    """The spec file as written: one deployment (model, serve), or several (deployments)."""

    name: str = doc("cluster name (state, logs, process labels)")
    vllm: VllmSection = doc("the vLLM release and runtime, for every deployment")
    nodes: tuple[Node, ...] = doc("the machines; the first is rank 0 (and the endpoint's host)")
    model: ModelSection | None = doc(
        "the model to serve (one deployment; else under deployments)", default=None
    )
    serve: dict[str, JsonValue] = doc(
        "`vllm serve` options as snake_case keys, identical on all nodes (one deployment)",
        default_factory=dict,
    )
    deployments: tuple[DeploymentSection, ...] = doc(
        "several models on the nodes, each with its own nodes, model and serve", default=()
    )
    endpoint: EndpointSection | None = doc(
        "one OpenAI-compatible endpoint in front of every deployment", default=None
    )
    env: dict[str, EnvValue] = doc("environment identical on all nodes", default_factory=dict)
    secrets: tuple[str, ...] = doc(
        "names of variables passed from the launcher's environment, never shown", default=()
    )
    ssh_config: str | None = doc("ssh_config file to use instead of ~/.ssh/config", default=None)
    export: ExportSection | None = doc(
        "how other tools run the deployments (export.k8s: `spark-launch export k8s`)", default=None
    )
    api: ApiSection = doc("where each deployment's API listens", default_factory=ApiSection)


def spec_schema() -> dict[str, Any]:
    """JSON Schema of the spec, for editors and scripts."""
    return json_schema(SpecFile, "spark-launch deployment spec")
