"""Derived settings of memory: what each node's vLLM may claim, and the KV cache each rank gets. Pure.

Left unset, each node's vLLM claims its release's default fraction of its own memory: 0.92
up to 0.33; from 0.34 none, resolved 1.0 with the extensible KV cache (the CUDA default) and
0.92 without (vllm/config/cache.py, CacheConfig.resolved_gpu_memory_utilization). On a DGX
Spark that memory is the system's too (unified): the OS and the page cache need their part,
and a second deployment on the node would find the first had claimed it all. So the plan
always writes the split out, the same on every node:

- `--gpu-memory-utilization`: the spec's, else the node's memory less a reserve for the OS and
  the page cache, divided among the deployments on the node, as a fraction of the memory
  (the least of the nodes' fractions: one flag for all).
- `--kv-cache-memory-bytes`: the spec's, else, where the nodes' memory differs, the KV cache
  every rank gets: the smallest rank's share less its weights and room for activations. One
  fraction of a 64 GB and of a 128 GB Spark would give the larger node a claim it cannot use
  (vLLM gives every rank the smallest rank's number of blocks: get_kv_cache_configs); an
  absolute size is one argv for all, and vLLM then sizes no cache by itself.
"""

from __future__ import annotations

import math
import re

from launcher.core.rules.base import Decision, Inputs, RuleProblem
from launcher.core.spec.sections import Node

GiB = 1 << 30
MiB = 1 << 20
SPARK_MEMORY = 127600748 * 1024  # MemTotal of a 128 GB DGX Spark (GB10): about 121.7 GiB
FLOOR = 4 * GiB  # the OS, sshd and vLLM's own processes
PAGE_CACHE = 14 * GiB  # the page cache: CUDA's start-up check on unified memory does not count it free
ACTIVATIONS = 6 * GiB  # per rank, beside weights and KV cache, when the plan sizes the KV cache itself
CPU_KV_SPACE = "VLLM_CPU_KVCACHE_SPACE"
SIZE = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])\Z")


def node_memory(node: Node) -> int:
    """The memory vLLM's fraction is taken of on `node` (bytes): the spec's, else a Spark's."""
    return int(node.memory_gib * GiB) if node.memory_gib is not None else SPARK_MEMORY


def memory_text(node: Node) -> str:
    """A node's memory as the plan assumes it, and whence."""
    if node.memory_gib is not None:
        return f"{node.memory_gib:g} GiB (nodes[].memory_gib)"
    return f"{SPARK_MEMORY / GiB:.1f} GiB (a 128 GB DGX Spark; nodes[].memory_gib unset)"


def node_share(inputs: Inputs, node: Node) -> int:
    """What this deployment may claim of `node` (bytes): its memory less the reserve, divided
    among the deployments on the node."""
    return (node_memory(node) - FLOOR - PAGE_CACHE) // max(1, inputs.sharing.deployments.get(node.name, 1))


def differ(inputs: Inputs) -> bool:
    """True when the nodes' memory differs (per GPU)."""
    return len({node_memory(n) // max(1, n.gpus) for n in inputs.spec.nodes}) > 1


def cpu_kv_space(inputs: Inputs) -> bool:
    """True when the spec sizes the CPU build's KV cache itself (VLLM_CPU_KVCACHE_SPACE)."""
    return CPU_KV_SPACE in inputs.spec.env


def absolute(inputs: Inputs) -> bool:
    """The KV cache is pinned in bytes: written in the spec, or where the nodes' memory differs."""
    if inputs.spec.serve.get("kv_cache_memory_bytes") is not None:
        return True
    return differ(inputs) and not cpu_kv_space(inputs)


def utilization(inputs: Inputs) -> Decision:
    """The spec's fraction, else the least fraction of any node that keeps the reserve free."""
    option = inputs.catalog.options["gpu_memory_utilization"]
    explicit = inputs.explicit("gpu_memory_utilization")
    if explicit is not None:
        return Decision(explicit, (f"{option.flag}={explicit}",), _uneven(inputs, explicit))
    fractions = {n.name: node_share(inputs, n) / node_memory(n) for n in inputs.spec.nodes}
    least = min(fractions.values())
    value = math.floor(least * 100) / 100
    if value <= 0:
        raise RuleProblem(
            "gpu_memory_utilization",
            "leaves nothing to claim: each node's memory less "
            f"{(FLOOR + PAGE_CACHE) / GiB:.0f} GiB for the OS and the page cache, shared by its deployments",
            "give the nodes' memory (nodes[].memory_gib), or write gpu_memory_utilization",
        )
    return Decision(value, (f"{option.flag}={value}",), _explain(inputs, value))


def _explain(inputs: Inputs, value: float) -> str:
    """How the plan's fraction was reached: nodes alike said once."""
    groups: dict[tuple[str, int], list[str]] = {}
    for node in inputs.spec.nodes:
        shared = inputs.sharing.deployments.get(node.name, 1)
        groups.setdefault((memory_text(node), shared), []).append(node.name)
    by_name = {n.name: n for n in inputs.spec.nodes}
    parts = []
    for (text, shared), names in groups.items():
        among = f", shared by {shared} deployments" if shared > 1 else ""
        share = node_share(inputs, by_name[names[0]])
        parts.append(f"{', '.join(names)}: {text}{among}: {share / GiB:.1f} GiB")
    reserve = f"{FLOOR / GiB:.0f} GiB for the OS and {PAGE_CACHE / GiB:.0f} GiB for the page cache"
    gate = (
        "; with the KV cache pinned in bytes it gates vLLM's start-up check only" if absolute(inputs) else ""
    )
    if cpu_kv_space(inputs):
        gate = f"; on the CPU build {CPU_KV_SPACE} sizes the KV cache and vLLM checks no fraction"
    return (
        f"gpu_memory_utilization {value} written by the plan: each node's memory less {reserve} "
        f"({'; '.join(parts)}), the least fraction of any node, rounded down{gate}"
    )


def _uneven(inputs: Inputs, value: object) -> str | None:
    """The spec's fraction on nodes of different memory: said, with what it does there."""
    if not differ(inputs) or absolute(inputs):
        return None
    sizes = ", ".join(f"{n.name} {node_memory(n) / GiB:.1f} GiB" for n in inputs.spec.nodes)
    return (
        f"gpu_memory_utilization {value} of nodes whose memory differs ({sizes}): each node claims "
        "that fraction of its own, but every rank gets the smallest rank's KV cache "
        "(vLLM's get_kv_cache_configs): set kv_cache_memory_bytes for a claim equal on every node"
    )


def kv_cache_bytes(inputs: Inputs) -> Decision:
    """The spec's size, else the smallest rank's share less its weights and activations."""
    option = inputs.catalog.options["kv_cache_memory_bytes"]
    explicit = inputs.explicit("kv_cache_memory_bytes")
    if explicit is not None:
        value = size_bytes(explicit)
        return Decision(value, (f"{option.flag}={value}",), f"KV cache {value / GiB:.2f} GiB per rank (spec)")
    weights = inputs.sharing.weight_bytes
    if weights is None:
        raise RuleProblem(
            "kv_cache_memory_bytes",
            "must be set: the nodes' memory differs, so the plan pins the KV cache each rank gets, "
            "and it cannot read the model's weights to size it",
            "write kv_cache_memory_bytes (per GPU, e.g. '24G'); `spark-launch check` shows each "
            "node's weights and room; or plan where the model's files are readable",
        )
    ranks = _ranks(inputs)
    rank_share = min(node_share(inputs, n) // max(1, n.gpus) for n in inputs.spec.nodes)
    value = (rank_share - weights // ranks - ACTIVATIONS) // MiB * MiB
    if value <= 0:
        raise RuleProblem(
            "kv_cache_memory_bytes",
            f"leaves no KV cache: the smallest rank's share {rank_share / GiB:.1f} GiB holds its "
            f"weights {weights / ranks / GiB:.1f} GiB and {ACTIVATIONS / GiB:.0f} GiB for activations",
            "spread the model over more nodes, or give the nodes' memory (nodes[].memory_gib)",
        )
    note = (
        f"KV cache {value / GiB:.2f} GiB on every rank, written by the plan: the nodes' memory differs, "
        f"so the smallest rank's share {rank_share / GiB:.1f} GiB less its weights "
        f"{weights / ranks / GiB:.1f} GiB and {ACTIVATIONS / GiB:.0f} GiB for activations; every "
        "node claims the same"
    )
    return Decision(value, (f"{option.flag}={value}",), note)


def _ranks(inputs: Inputs) -> int:
    """The ranks one copy of the weights is split over (tensor x pipeline parallel)."""
    sizes = [inputs.spec.serve.get(k) for k in ("tensor_parallel_size", "pipeline_parallel_size")]
    return math.prod(s if isinstance(s, int) and not isinstance(s, bool) and s > 0 else 1 for s in sizes)


def size_bytes(value: object) -> int:
    """A size as vLLM's human_readable_int reads it (1k = 1000, 1K = 1024), in bytes."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    text = str(value).strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    match = SIZE.match(text)
    if match is None:
        raise RuleProblem(
            "kv_cache_memory_bytes", f"expected a size in bytes, got {value!r}", "e.g. 25769803776 or '24G'"
        )
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * 1000 ** " kmgt".index(suffix))
    if "." in number:
        raise RuleProblem(
            "kv_cache_memory_bytes",
            f"{value!r}: no decimals with {suffix}",
            f"write {number}{suffix.lower()}",
        )
    return int(number) * int(1024 ** " KMGT".index(suffix))
