"""A spec file's deployments: each one a Spec of its own, planned like a one-model spec. Pure.

A file with `model:` (and `serve:`) is one deployment, named after the cluster, on every
node: the Spec is the file's own values, so such a file plans exactly as it always did.
A file with `deployments:` is several, each on a subset of the nodes; each deployment's
Spec carries the shared sections (vllm, env, secrets, ssh_config), its own nodes in its
order, its model and its serve, and the name `<cluster>/<deployment>`: its processes, run
directories, logs, state and lock are its own.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from launcher.core.spec.k8s_spec_checks import check_k8s
from launcher.core.spec.schema import suggest
from launcher.core.spec.sections import (
    LISTEN_WORDS,
    DeploymentSection,
    EndpointSection,
    ModelSection,
    Node,
    Spec,
    SpecFile,
)
from launcher.core.spec.spec_checks import CLUSTER_NAME, check_common, check_model
from launcher.errors import Problem

Path = tuple[str | int, ...]
ENDPOINT = "endpoint"  # the endpoint's run directory beside the deployments': no deployment's name
ROUTER_BIN = r"/[^\s=:]*\Z"  # compiled when first used: a spec with an endpoint
API_KEY = "VLLM_API_KEY"  # the deployments' key (vLLM reads it): never the endpoint's clients'
MODEL_REQUIRED = Problem(("model",), "is required", "or list the models under deployments:")


def deployment_specs(file: SpecFile) -> tuple[Spec, ...]:
    """One Spec per deployment, in the file's order (nodes it does not know are left out)."""
    if not file.deployments:
        if file.model is None:
            return ()
        return (_spec(file, file.name, file.nodes, file.model, file.serve),)
    by_name = {n.name: n for n in file.nodes}
    return tuple(
        _spec(
            file,
            f"{file.name}/{d.name}",
            tuple(by_name[n] for n in dict.fromkeys(d.nodes) if n in by_name),
            d.model,
            d.serve,
        )
        for d in file.deployments
    )


def _spec(
    file: SpecFile, name: str, nodes: tuple[Node, ...], model: ModelSection, serve: dict[str, Any]
) -> Spec:
    endpoint_node = file.nodes[0].name if file.endpoint is not None and file.nodes else None
    # The endpoint's client key is the endpoint's alone: never in a vLLM process's environment.
    own = file.endpoint.key if file.endpoint is not None else None
    secrets = tuple(s for s in file.secrets if s != own)
    shared = (file.env, secrets, file.ssh_config, file.api, endpoint_node)
    return Spec(name, file.vllm, nodes, model, serve, *shared)


def deployment_names(file: SpecFile) -> tuple[str, ...]:
    """Each deployment's name, as `--deployment` takes it (the cluster's name for one deployment)."""
    return tuple(d.name for d in file.deployments) or (file.name,)


def relocate(file: SpecFile, index: int, problem: Problem) -> Problem:
    """A problem of deployment `index`'s Spec, located where the file writes it."""
    if not file.deployments:
        return problem
    path = problem.path
    if path[:1] in (("serve",), ("model",)):
        path = ("deployments", index, *path)
    elif path[:1] == ("nodes",) and len(path) > 1 and isinstance(path[1], int):
        mine = [n for n in dict.fromkeys(file.deployments[index].nodes) if n in _names(file)]
        if path[1] < len(mine):
            path = ("nodes", _names(file).index(mine[path[1]]), *path[2:])
    return Problem(path, problem.message, problem.hint, problem.cause)


def _names(file: SpecFile) -> list[str]:
    return [n.name for n in file.nodes]


def check_file(file: SpecFile) -> list[Problem]:
    """Problems of the file's shape, its deployments and its endpoint, then of each deployment."""
    problems = check_common(file) + _check_shape(file)
    for i, deployment in enumerate(file.deployments):
        problems += _check_deployment(file, i, deployment)
    problems += _check_served_names(file)
    if file.endpoint is not None:
        problems += _check_endpoint(file.endpoint, file.secrets)
    problems += _check_listen_places(file)
    for i, spec in enumerate(deployment_specs(file)):
        problems += [relocate(file, i, p) for p in check_model(spec.model, spec.vllm)]
    if file.export is not None and file.export.k8s is not None:
        paths = [s.model.path for s in deployment_specs(file)]
        problems += check_k8s(file.export.k8s, file.vllm.runtime, file.endpoint is not None, paths)
    return problems


def _check_shape(file: SpecFile) -> list[Problem]:
    if not file.deployments:
        if file.model is None:
            return [MODEL_REQUIRED]
        return []
    hint = "with deployments:, each deployment has its own model and serve"
    return [
        Problem((key,), f"a top-level {key} cannot go with deployments:", hint)
        for key in ("model", "serve")
        if getattr(file, key)
    ]


def _check_deployment(file: SpecFile, i: int, deployment: DeploymentSection) -> list[Problem]:
    where: Path = ("deployments", i)
    problems = []
    if not CLUSTER_NAME.match(deployment.name) or deployment.name == ENDPOINT:
        problems.append(
            Problem(
                (*where, "name"),
                f"{deployment.name!r} is not a usable deployment name",
                "use lower-case letters, digits, '.', '-' or '_' (it names files); 'endpoint' is taken",
            )
        )
    if [d.name for d in file.deployments].count(deployment.name) > 1:
        problems.append(Problem((*where, "name"), f"{deployment.name!r} names more than one deployment"))
    if not deployment.nodes:
        problems.append(Problem((*where, "nodes"), "needs at least one node", "list node names from nodes:"))
    known = _names(file)
    for j, node in enumerate(deployment.nodes):
        if node not in known:
            hint = suggest(node, known) or f"the nodes are {', '.join(known)}"
            problems.append(Problem((*where, "nodes", j), f"{node!r} is not one of the nodes", hint))
        elif deployment.nodes.index(node) != j:
            problems.append(Problem((*where, "nodes", j), f"{node!r} is listed twice"))
    return problems


def served_name(spec: Spec) -> str:
    """The name clients ask for: the served name, else the model path (as vLLM serves it)."""
    return spec.model.served_name or spec.model.path


def _check_served_names(file: SpecFile) -> list[Problem]:
    names = [served_name(s) for s in deployment_specs(file)]
    counts = Counter(names)
    return [
        Problem(
            ("deployments", i, "model", "served_name"),
            f"{name!r} is served by more than one deployment: the endpoint could not tell them apart",
            "give each deployment its own model.served_name",
        )
        for i, name in enumerate(names)
        if counts[name] > 1 and file.deployments
    ]


def _check_listen_places(file: SpecFile) -> list[Problem]:
    """api.listen where each deployment's rank 0 is: loopback only where the endpoint (if any) runs
    on the same node; an address only of the one node every deployment has as its rank 0."""
    listen, where = file.api.listen, ("api", "listen")
    heads = {s.nodes[0].name for s in deployment_specs(file) if s.nodes}
    if listen == "loopback" and file.endpoint is not None and heads - {file.nodes[0].name}:
        away = ", ".join(sorted(heads - {file.nodes[0].name}))
        return [
            Problem(
                where,
                f"the endpoint on {file.nodes[0].name} could not reach a deployment whose API listens on "
                f"{away}'s loopback",
                "leave api.listen unset (loopback where the endpoint runs, the node's address elsewhere), "
                "or write fabric",
            )
        ]
    if listen is None or listen in LISTEN_WORDS:
        return []
    owner = next((n.name for n in file.nodes if n.address == listen), None)
    if len(heads) > 1 or (owner is not None and owner not in heads):
        return [
            Problem(
                where,
                f"{listen} is one node's address, but the API listens on "
                f"{', '.join(sorted(heads))} (each deployment's rank 0)",
                "write fabric (each rank 0's own address), or the rank 0 node's address",
            )
        ]
    return []


def _check_endpoint(endpoint: EndpointSection, secrets: tuple[str, ...]) -> list[Problem]:
    problems = _check_endpoint_key(endpoint, secrets)
    if not 0 < endpoint.port < 65536:
        problems.append(Problem(("endpoint", "port"), f"must be a port number, got {endpoint.port}"))
    if endpoint.venv is not None and not re.match(ROUTER_BIN, endpoint.venv):
        problems.append(
            Problem(
                ("endpoint", "venv"),
                f"{endpoint.venv!r} is not an absolute path without spaces, '=' or ':'",
                "a venv holding the pinned router on the head node, or leave it out: `up` builds one",
            )
        )
    return problems


def _check_endpoint_key(endpoint: EndpointSection, secrets: tuple[str, ...]) -> list[Problem]:
    """The endpoint's own client key: a secret of its own, or `auth: none` said out loud."""
    where = ("endpoint", "key")
    if endpoint.auth == "none":
        if endpoint.key is not None:
            return [Problem(where, "is given, but endpoint.auth is none", "remove one of the two")]
        return []
    if endpoint.key is None:
        return [
            Problem(
                where,
                "is required: the endpoint takes requests from clients, and needs a key of its own",
                "name a secret holding it (e.g. key: SPARK_ENDPOINT_KEY, listed under secrets:), "
                "or write endpoint.auth: none to take requests without a key",
            )
        ]
    if endpoint.key == API_KEY:
        return [
            Problem(
                where,
                f"{API_KEY} is the deployments' own key: the endpoint's clients need another",
                "name another secret (e.g. SPARK_ENDPOINT_KEY), so a client's key is never a backend's",
            )
        ]
    if endpoint.key not in secrets:
        return [Problem(where, f"{endpoint.key} is not under secrets:", f"add it: secrets: [{endpoint.key}]")]
    return []
