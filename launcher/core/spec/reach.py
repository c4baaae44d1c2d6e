"""What reaching a running cluster needs of a spec: its name, its nodes and SSH. Pure.

`down`, `status`, `logs` and `diagnose` work from this alone when the rest of the spec does
not plan (a typo, a vLLM version without rules, a model path changed since `up`): what
runs is then what the nodes' own state says. The parts are built with the same typed
validation as the whole spec, and the same checks of node names and ssh targets. A file
with `deployments:` reaches each deployment by its name and its nodes.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.spec.schema import convert
from launcher.core.spec.sections import Node, Spec, VllmSection
from launcher.core.spec.spec_checks import CLUSTER_NAME, check_nodes
from launcher.errors import Problem


@dataclass(frozen=True, slots=True)
class Reach:
    """The cluster's name, its nodes (rank order) and how to reach them; nothing of vLLM."""

    name: str
    nodes: tuple[Node, ...]
    ssh_config: str | None = None
    secrets: tuple[str, ...] = ()
    runtime: str | None = None  # None: the spec cannot tell (each node's state says)
    venv: str | None = None

    @classmethod
    def of(cls, spec: Spec) -> Reach:
        """The reach of a whole, valid spec."""
        vllm = spec.vllm
        return cls(spec.name, spec.nodes, spec.ssh_config, spec.secrets, vllm.runtime, vllm.venv)


def reach_of(data: Any) -> tuple[Reach | None, list[Problem]]:
    """The reach of loaded spec data however broken its other parts: a Reach, or its problems."""
    if not isinstance(data, Mapping):
        return None, [Problem((), "expected a mapping with name and nodes")]
    problems: list[Problem] = []
    hints = typing.get_type_hints(Spec, include_extras=True)
    values = {
        key: _part(data, key, hints[key], problems) for key in ("name", "nodes", "ssh_config", "secrets")
    }
    name, nodes = values["name"], values["nodes"]
    if isinstance(name, str) and not CLUSTER_NAME.match(name):
        problems.append(Problem(("name",), f"{name!r} is not a usable cluster name"))
    if isinstance(nodes, tuple):
        problems += check_nodes(nodes)
    if problems or not isinstance(name, str) or not isinstance(nodes, tuple):
        return None, problems
    found = data.get("vllm")
    vllm: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    runtime = vllm.get("runtime", "venv")
    venv = vllm.get("venv")
    return Reach(
        name,
        nodes,
        values["ssh_config"],
        values["secrets"] or (),
        runtime if runtime in typing.get_args(_runtime_type()) else None,
        venv if isinstance(venv, str) and venv.startswith("/") else None,
    ), []


def deployment_reaches(data: Any) -> tuple[dict[str, Reach] | None, bool, list[Problem]]:
    """Each deployment's reach by its name (`--deployment NAME`; the cluster's name for a file of
    one), whether the file has several, or the problems that keep its nodes out of reach."""
    reach, problems = reach_of(data)
    if reach is None:
        return None, False, problems
    written = data.get("deployments")
    if not isinstance(written, list) or not written:
        return {reach.name: reach}, False, []
    by_name = {n.name: n for n in reach.nodes}
    out: dict[str, Reach] = {}
    for i, entry in enumerate(written):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        listed = entry.get("nodes") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not CLUSTER_NAME.match(name) or not isinstance(listed, list):
            problems.append(Problem(("deployments", i), "needs a usable name and a list of nodes"))
            continue
        nodes = tuple(by_name[n] for n in dict.fromkeys(listed) if isinstance(n, str) and n in by_name)
        if nodes:  # one on no known node runs nowhere
            out[name] = dataclasses.replace(reach, name=f"{reach.name}/{name}", nodes=nodes)
    if not out and not problems:
        problems.append(Problem(("deployments",), "no deployment is on a known node"))
    return (None if problems else out), True, problems


def _part(data: Mapping[str, Any], key: str, hint: Any, problems: list[Problem]) -> Any:
    if key not in data:
        if key in ("name", "nodes"):
            problems.append(Problem((key,), "is required"))
        return None
    return convert(hint, data[key], (key,), problems)


def _runtime_type() -> Any:
    return typing.get_type_hints(VllmSection)["runtime"]
