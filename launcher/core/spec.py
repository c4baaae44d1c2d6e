"""The deployment spec: one YAML file, validated at the boundary into frozen values."""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from launcher.core.catalog import parse_version
from launcher.core.container import ContainerSection, check_container
from launcher.core.schema import EnvValue, build, doc, json_schema
from launcher.errors import Problem

# Set by the launcher for each node from its own fields; never written by hand.
PER_NODE_ENV = ("VLLM_HOST_IP", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
CLUSTER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}\Z")
IFACE_NAME = re.compile(r"[A-Za-z0-9._@-]{1,15}\Z")
SSH_TARGET = re.compile(r"(?:[^@\s:]+@)?[^@\s:]+(?::\d{1,5})?\Z")


@dataclass(frozen=True)
class VllmSection:
    """Which vLLM runs on the nodes, and how it is installed there."""

    version: str = doc("the vLLM release installed on every node, e.g. 0.33.0")
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
        "for a release with no catalog: use this known release's flags, at your own risk",
        default=None,
    )


@dataclass(frozen=True)
class Node:
    """One machine; the first node listed is rank 0 and serves the API."""

    name: str = doc("short node name used in output, logs and state")
    ssh: str = doc("ssh_config alias, or user@host[:port]")
    address: str = doc("the node's fabric IP: VLLM_HOST_IP; rank 0's is --master-addr")
    interface: str = doc("fabric interface: NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME")
    hca: tuple[str, ...] = doc("RoCE devices of that port: NCCL_IB_HCA", default=())
    gpus: int = doc("GPUs on this node (a DGX Spark has one)", default=1)
    env: dict[str, EnvValue] = doc(
        "per-node environment that is not an engine input (no VLLM_* here)", default_factory=dict
    )


@dataclass(frozen=True)
class ModelSection:
    """The model, at the same path on every node."""

    path: str = doc("absolute path of the model directory, the same on every node")
    served_name: str | None = doc("name the API serves the model as", default=None)
    hybrid: bool | None = doc(
        "true for models mixing mamba/linear attention with attention; read from config.json when unset",
        default=None,
    )


@dataclass(frozen=True)
class Spec:
    """A whole vLLM deployment across several nodes."""

    name: str = doc("cluster name (state, logs, process labels)")
    vllm: VllmSection = doc("the vLLM release and runtime")
    nodes: tuple[Node, ...] = doc("the machines; the first is rank 0")
    model: ModelSection = doc("the model to serve")
    serve: dict[str, Any] = doc(
        "`vllm serve` options as snake_case keys, identical on all nodes", default_factory=dict
    )
    env: dict[str, EnvValue] = doc("environment identical on all nodes", default_factory=dict)
    secrets: tuple[str, ...] = doc(
        "names of variables passed from the launcher's environment, never shown", default=()
    )
    ssh_config: str | None = doc("ssh_config file to use instead of ~/.ssh/config", default=None)

    @property
    def head(self) -> Node:
        """Rank 0, the node serving the API."""
        return self.nodes[0]


def spec_schema() -> dict[str, Any]:
    """JSON Schema of the spec, for editors and scripts."""
    return json_schema(Spec, "spark-launch deployment spec")


def validate_spec(data: Any) -> tuple[Spec | None, list[Problem]]:
    """Validate loaded data: the Spec when it could be built (even with problems), and every problem."""
    problems: list[Problem] = []
    spec = build(Spec, data, (), problems)
    if not isinstance(spec, Spec):
        return None, problems
    return spec, problems + check_spec(spec)


def check_spec(spec: Spec) -> list[Problem]:
    """Problems a structurally valid spec can still have, without knowing vLLM."""
    problems = [*_check_top(spec), *_check_vllm(spec.vllm), *_check_nodes(spec.nodes)]
    problems += _check_env(spec)
    problems += check_container(spec.vllm.container, spec.vllm.runtime, spec.model.path)
    name = spec.model.served_name
    if name is not None and (not name.strip() or name.startswith("-")):
        problems.append(
            Problem(
                ("model", "served_name"),
                f"{name!r} cannot be a served model name",
                "use a non-empty name that does not start with '-'",
            )
        )
    if not spec.model.path.startswith("/"):
        problems.append(
            Problem(
                ("model", "path"),
                "must be an absolute path",
                "the same absolute path must exist on every node",
            )
        )
    return problems


def _check_top(spec: Spec) -> list[Problem]:
    if CLUSTER_NAME.match(spec.name):
        return []
    return [
        Problem(
            ("name",),
            f"{spec.name!r} is not a usable cluster name",
            "use lower-case letters, digits, '.', '-' or '_' (it names files and labels)",
        )
    ]


def _check_vllm(section: VllmSection) -> list[Problem]:
    problems = []
    for key in ("version", "flags_from"):
        value = getattr(section, key)
        try:
            if value is not None:
                parse_version(value)
        except ValueError:
            problems.append(
                Problem(
                    ("vllm", key), f"{value!r} is not a release number", 'write it like "0.33.0" (quoted)'
                )
            )
    needed = "venv" if section.runtime == "venv" else "image"
    if getattr(section, needed) is None:
        problems.append(Problem(("vllm", needed), f"is required with runtime {section.runtime}"))
    if section.venv is not None and not section.venv.startswith("/"):
        problems.append(Problem(("vllm", "venv"), "must be an absolute path on the nodes"))
    return problems


def _check_nodes(nodes: tuple[Node, ...]) -> list[Problem]:
    if not nodes:
        return [Problem(("nodes",), "needs at least one node")]
    problems: list[Problem] = []
    for key in ("name", "address", "ssh"):
        counts = Counter(getattr(n, key) for n in nodes)
        for i, node in enumerate(nodes):
            if counts[getattr(node, key)] > 1:
                problems.append(
                    Problem(("nodes", i, key), f"{getattr(node, key)!r} is used by more than one node")
                )
    for i, node in enumerate(nodes):
        problems += _check_node(i, node)
    return problems


def _check_node(i: int, node: Node) -> list[Problem]:
    where: tuple[str | int, ...] = ("nodes", i)
    problems = []
    if not CLUSTER_NAME.match(node.name):
        problems.append(
            Problem(
                (*where, "name"),
                f"{node.name!r} is not a usable node name",
                "use lower-case letters, digits, '.', '-' or '_'",
            )
        )
    try:
        ipaddress.ip_address(node.address)
    except ValueError:
        problems.append(
            Problem(
                (*where, "address"),
                f"{node.address!r} is not an IP address",
                "vLLM binds to it (VLLM_HOST_IP): give the node's fabric IP, not a name",
            )
        )
    if not SSH_TARGET.match(node.ssh):
        problems.append(
            Problem(
                (*where, "ssh"),
                f"{node.ssh!r} is not an ssh target",
                "use an ssh_config alias or user@host[:port]",
            )
        )
    devices: list[tuple[tuple[str | int, ...], str]] = [((*where, "interface"), node.interface)]
    devices += [((*where, "hca", j), hca) for j, hca in enumerate(node.hca)]
    for path, value in devices:
        if not IFACE_NAME.match(value):
            problems.append(Problem(path, f"{value!r} is not a network device name"))
    if node.gpus < 1:
        problems.append(Problem((*where, "gpus"), "must be at least 1"))
    for name in node.env:
        if name.startswith("VLLM_"):
            problems.append(
                Problem(
                    (*where, "env", name),
                    "a VLLM_* variable is an engine input and must be identical on all nodes",
                    "move it to the top-level env",
                )
            )
    return problems


def _check_env(spec: Spec) -> list[Problem]:
    problems = []
    scopes: list[tuple[tuple[str | int, ...], dict[str, str]]] = [(("env",), spec.env)]
    scopes += [(("nodes", i, "env"), n.env) for i, n in enumerate(spec.nodes)]
    for where, env in scopes:
        for name in env:
            if not ENV_NAME.match(name):
                problems.append(Problem((*where, name), f"{name!r} is not a valid variable name"))
            elif name in PER_NODE_ENV:
                problems.append(
                    Problem(
                        (*where, name),
                        "is set by the launcher for each node",
                        "set the node's address, interface and hca instead",
                    )
                )
    for j, name in enumerate(spec.secrets):
        if not ENV_NAME.match(name):
            problems.append(Problem(("secrets", j), f"{name!r} is not a valid variable name"))
        elif name in spec.env or any(name in n.env for n in spec.nodes):
            problems.append(
                Problem(
                    ("secrets", j),
                    f"{name} is also given a value in env",
                    "a secret's value comes from the launcher's environment only",
                )
            )
    return problems
