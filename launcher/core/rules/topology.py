"""Derived settings of the multi-node topology: backend, nodes, rendezvous, ports, parallel sizes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from launcher.core.rules.base import Decision, Inputs, RuleProblem, Unresolved, pinned
from launcher.core.spec.deployments import API_KEY
from launcher.core.spec.spec_checks import MAX_GPUS
from launcher.core.vllm.argv import PORTS

DEFAULT_MASTER_PORT = 29501
DEFAULT_API_PORT = 8000
RULE_PORTS = frozenset({"master_port", "port"})  # decided by rules, in this order


def several_nodes(inputs: Inputs) -> bool:
    """The multi-node flags apply: one node is a plain `vllm serve` (no rendezvous, no ranks)."""
    return len(inputs.spec.nodes) > 1


def fixed(setting: str, value: Callable[[Inputs], Any]) -> Callable[[Inputs], Decision]:
    """A decider pinning `setting` to a value computed from the spec alone."""

    def decide(inputs: Inputs) -> Decision:
        return pinned(inputs, setting, value(inputs))

    return decide


def port_setting(key: str, default: int) -> Callable[[Inputs], Decision]:
    """A decider pinning port `key`: the spec's value, else `default`, always written out."""

    def decide(inputs: Inputs) -> Decision:
        value = inputs.explicit(key)
        value = default if value is None else value
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
            raise RuleProblem(key, f"must be a port number, got {value!r}", "1 to 65535")
        _refuse_clash(inputs, key, value)
        inputs.resolved[key] = value
        return pinned(inputs, key, value)

    return decide


def _refuse_clash(inputs: Inputs, key: str, value: int) -> None:
    """Two of vLLM's listeners on one port: the second fails to bind only once the weights are loading."""
    taken = {k: v for k in PORTS if k != key and (v := inputs.resolved.get(k)) is not None}
    taken |= {
        k: v for k in sorted(PORTS - RULE_PORTS) if (v := inputs.spec.serve.get(k)) is not None and k != key
    }
    clash = next((k for k, v in taken.items() if v == value), None)
    if clash is not None:
        whose = "the spec's" if clash in inputs.spec.serve else "vLLM's default"
        raise RuleProblem(
            key,
            f"{value} is also {clash} ({whose}): two listeners cannot share a port",
            f"give {key} and {clash} different ports, e.g. {key}: {_free_port(value, taken)}",
        )


def _free_port(value: int, taken: dict[str, Any]) -> int:
    """The next port after `value` that nothing else here uses."""
    port = value + 1
    while port in taken.values():
        port += 1
    return port if port < 65536 else 1024


def parallel(inputs: Inputs) -> Decision:
    """tensor x pipeline x data parallel must equal the GPUs of all nodes, equal per node."""
    nodes = inputs.spec.nodes
    if any(not 1 <= n.gpus <= MAX_GPUS for n in nodes):
        raise Unresolved("gpus")  # the spec checks report it; a sum of it would only mislead
    # Unset means 1; a falsy value written (0, false, "", []) is refused, never read as 1.
    sizes = {
        k: 1 if inputs.explicit(k) is None else inputs.explicit(k)
        for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
    }
    for key, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise RuleProblem(key, f"must be a positive integer, got {value!r}", "1 or more (unset means 1)")
    if len({n.gpus for n in nodes}) > 1:
        raise RuleProblem(
            "tensor_parallel_size",
            "nodes have different GPU counts; vLLM's mp backend "
            "runs the same number of workers on every node",
            "use nodes with equal gpus",
        )
    world = sizes["tensor_parallel_size"] * sizes["pipeline_parallel_size"] * sizes["data_parallel_size"]
    gpus = sum(n.gpus for n in nodes)
    if world != gpus:
        fitting = gpus // (sizes["pipeline_parallel_size"] * sizes["data_parallel_size"]) or 1
        raise RuleProblem(
            "tensor_parallel_size",
            f"tensor x pipeline x data parallel = {world}, but the {len(nodes)} node(s) have {gpus} GPU(s)",
            f"e.g. tensor_parallel_size: {fitting}",
        )
    tp = sizes["tensor_parallel_size"]
    return pinned(inputs, "tensor_parallel_size", tp)


# What vLLM's API takes without VLLM_API_KEY's check: the key guards only the paths under /v1,
# /v2, /inference and /cohere (vllm/entrypoints/serve/middleware/authenticate.py, GUARDED_PREFIX,
# 0.32 and 0.33).
UNGUARDED = "/invocations, /tokenize, /detokenize, /pause, /resume, /abort_requests, /metrics"


def listen(inputs: Inputs) -> Decision:
    """vLLM's --host: api.listen, else loopback behind an endpoint on the same node, else the rank 0
    node's address; never every interface unless the spec says `all`. Said out loud: who reaches
    it, and what it takes without a key."""
    spec = inputs.spec
    head, chosen = spec.head, spec.api.listen
    fronted = spec.endpoint_node == head.name
    mode = chosen or ("loopback" if fronted else "fabric")
    host = {"loopback": "127.0.0.1", "fabric": head.address, "all": "0.0.0.0"}.get(mode, mode)
    # loopback where an endpoint on another node routes to it: refused with the file
    # (core.spec.deployments, _check_listen_places)
    decision = Decision(
        host,
        (f"{inputs.catalog.options['host'].flag}={host}",),
        source="spec" if chosen else "launcher",
    )
    if mode == "loopback":
        return decision
    port = inputs.resolved.get("port", DEFAULT_API_PORT)
    where = f"{host}:{port}" if mode != "all" else f"every interface of {head.name} (port {port})"
    keyed = API_KEY in spec.secrets
    if spec.endpoint_node is not None:
        guard = f"{API_KEY} guards /v1 only" if keyed else f"no {API_KEY}: any request"
        return replace(
            decision,
            note=f"the API listens on {where} so that the endpoint on {spec.endpoint_node} reaches it, "
            f"and so does whoever else reaches that address ({guard}); firewall port {port} of "
            f"{head.name} to {spec.endpoint_node}",
        )
    guard = (
        f"{API_KEY} guards /v1 only ({UNGUARDED} take any request)"
        if keyed
        else f"without {API_KEY} it takes any request"
    )
    return replace(
        decision,
        warning=f"the API listens on {where} with no endpoint in front; {guard}; firewall it to the "
        "clients, or put an endpoint in front (api.listen: loopback keeps it to the launcher)",
    )
