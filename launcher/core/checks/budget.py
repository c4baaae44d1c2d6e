"""What a plan claims of each node's memory, and what it needs inside that claim. Pure.

Three kinds of node, told apart by what `nvidia-smi` reports there:

    unified  a GPU that reports no dedicated memory ("[N/A]"): the GB10 of a DGX Spark, whose
             128 GB serve CPU and GPU alike. vLLM claims gpu_memory_utilization x the
             system's memory, and CUDA's start-up check does not count the page cache as
             free: a cache left by the last load makes the next start fail (0.34's
             extensible KV cache skips that check and sizes the cache from what is free).
             With --kv-cache-memory-bytes the claim is the weights, that cache and room for
             activations; the fraction then only gates the start-up check.
    gpu      a GPU with its own memory: the claim is a fraction of that memory (or, with
             --kv-cache-memory-bytes, the weights, that cache and room for activations).
    cpu      no GPU (the CPU build of vLLM): the KV cache is VLLM_CPU_KVCACHE_SPACE GiB (or
             --kv-cache-memory-bytes) beside the weights; without it, a fraction of memory.

The plan pins the fraction (and, where nodes differ, the KV cache in bytes): see
launcher/core/rules/memory_split.py. Where a plan has no pin, the release's own default applies
(`default_utilization`: 0.92 up to 0.33; from 0.34 1.0 with the extensible KV cache, else 0.92).

Inside the claim go this node's share of the weights and at least one sequence of
max_model_len tokens of KV cache (vLLM refuses to start with less); attention layers only
(the fixed state of linear-attention layers is small beside it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.rules.base import in_range
from launcher.core.rules.memory_split import ACTIVATIONS, FLOOR, GiB
from launcher.core.spec.versions import parse

UNIFIED, GPU, CPU = "unified", "gpu", "cpu"


@dataclass(frozen=True, slots=True)
class Budget:
    """One node's memory against the plan (bytes)."""

    kind: str
    total: int  # what a fraction is taken of: the system's memory, or the GPU's
    claim: int  # what the plan will claim
    claim_how: str  # how the claim was computed, in words
    weights: int  # this node's share of the model's weights
    kv: int | None  # KV cache for one max_model_len sequence here; None when unknown
    usable: int  # what the claim may take: after dropping the page cache, less FLOOR
    usable_now: int | None  # unified only: without dropping the page cache, less FLOOR
    page_cache: int
    available: int  # MemAvailable (the GPU's free memory on a gpu node)
    kv_space: int | None = None  # cpu: the explicit KV cache size

    @property
    def need(self) -> int:
        """What must fit inside the claim."""
        return (self.kv or 0) + (0 if self.kv_space is not None else self.weights)

    @property
    def inside(self) -> int:
        """The part of the claim that must hold `need`."""
        return self.kv_space if self.kv_space is not None else self.claim


def gib(value: float) -> str:
    """Bytes as GiB with one decimal."""
    return f"{value / GiB:.1f}"


def default_utilization(version: str, extensible: bool) -> float:
    """vLLM's own gpu_memory_utilization where none is given, by release.

    0.32, 0.33: 0.92 (vllm/config/cache.py, CacheConfig.gpu_memory_utilization's default).
    0.34 and later: None, resolved 1.0 with the extensible KV cache and 0.92 without
    (CacheConfig.resolved_gpu_memory_utilization).
    """
    return 1.0 if extensible and in_range(parse(version), ">=0.34") else 0.92


def extensible(version: str, serve: Mapping[str, Any], kind: str) -> bool:
    """Whether 0.34's extensible KV cache is on: the CUDA default, unless the KV cache is sized in
    bytes or the spec turns it off (vllm/config/vllm.py, VllmConfig._resolve_extensible_kv_cache).
    With it, vLLM skips its start-up check of free memory (vllm/v1/worker/utils.py, request_memory)."""
    if kind == CPU or not in_range(parse(version), ">=0.34"):
        return False
    return serve.get("kv_cache_memory_bytes") is None and serve.get("enable_extensible_kv_cache") is not False


def budget(
    serve: Mapping[str, Any],
    env: Mapping[str, str],
    gpus_here: int,
    memory: Mapping[str, Any],
    weights: int,
    version: str = "0.33.0",
) -> Budget:
    """One node's budget from the plan's serve options (its pins included) and env, the node's
    memory facts, and the release (whose default and start-up check apply where nothing is pinned)."""
    info = memory.get("meminfo") or {}
    total, free, available = (int(info.get(k, 0)) for k in ("MemTotal", "MemFree", "MemAvailable"))
    kind = node_kind(memory.get("gpus"))
    measured = extensible(version, serve, kind)
    util = float(serve.get("gpu_memory_utilization") or default_utilization(version, measured))
    tp, pp = int(serve.get("tensor_parallel_size", 1)), int(serve.get("pipeline_parallel_size", 1))
    share = weights * gpus_here // max(1, tp * pp)
    per_token = kv_bytes_per_token(memory.get("model_config"), tp, pp, serve)
    length = serve.get("max_model_len") or (memory.get("model_config") or {}).get("max_position_embeddings")
    kv_rank = per_token * int(length) if per_token and length else None
    kv = kv_rank * gpus_here if kv_rank is not None else None
    cache = max(0, available - free)
    space = kv_space(serve, env, kind, gpus_here)
    if kind == GPU:
        gpu_total = min(int(g["total"]) for g in memory["gpus"])
        gpu_free = min(int(g["free"] or 0) for g in memory["gpus"])
        weights_gpu = share // gpus_here
        if space is not None:
            claim = weights_gpu + space // gpus_here + ACTIVATIONS
            source = _space_source(serve, env)
            how = f"KV cache {gib(space // gpus_here)} GiB ({source}) + weights + activations"
            return Budget(
                GPU, gpu_total, claim, how, weights_gpu, kv_rank, gpu_free, None, cache, gpu_free, space
            )
        claim = int(util * gpu_total)
        how = f"gpu_memory_utilization {util} x {gib(gpu_total)} GiB of GPU memory"
        return Budget(GPU, gpu_total, claim, how, weights_gpu, kv_rank, gpu_free, None, cache, gpu_free)
    if space is not None:
        extra = ACTIVATIONS * gpus_here if kind == UNIFIED else 0
        how = f"{gib(space)} GiB of KV cache ({_space_source(serve, env)}) + {gib(share)} GiB of weights"
        how += f" + {gib(extra)} GiB for activations" if extra else ""
        now = free - FLOOR if kind == UNIFIED else None
        claim = space + share + extra
        return Budget(kind, total, claim, how, share, kv, available - FLOOR, now, cache, available, space)
    claim = int(util * total)
    source = "" if serve.get("gpu_memory_utilization") else f" (vLLM {version}'s default)"
    how = f"gpu_memory_utilization {util}{source} x {gib(total)} GiB"
    # On unified memory CUDA's start-up check wants the claim free, the page cache not counted;
    # 0.34's extensible KV cache skips that check (it sizes the cache from what is free).
    now = free - FLOOR if kind == UNIFIED and not measured else None
    return Budget(kind, total, claim, how, share, kv, available - FLOOR, now, cache, available)


def node_kind(gpus: Any) -> str:
    """unified when the GPUs report no memory of their own, gpu when they do, cpu without any."""
    if not gpus:
        return CPU
    return UNIFIED if any(g.get("total") is None for g in gpus) else GPU


def kv_space(serve: Mapping[str, Any], env: Mapping[str, str], kind: str = CPU, gpus: int = 1) -> int | None:
    """The KV cache size in bytes on the node, if the plan sets one: kv_cache_memory_bytes (per
    GPU, as vLLM reads it: the node's GPUs together), or on the CPU build VLLM_CPU_KVCACHE_SPACE."""
    explicit = serve.get("kv_cache_memory_bytes")
    if isinstance(explicit, int) and not isinstance(explicit, bool):
        return explicit * max(1, gpus)
    if kind == CPU and str(env.get("VLLM_CPU_KVCACHE_SPACE", "")).strip().isdigit():
        return int(env["VLLM_CPU_KVCACHE_SPACE"]) * GiB
    return None


def _space_source(serve: Mapping[str, Any], env: Mapping[str, str]) -> str:
    if isinstance(serve.get("kv_cache_memory_bytes"), int):
        return "kv_cache_memory_bytes"
    return f"VLLM_CPU_KVCACHE_SPACE={env['VLLM_CPU_KVCACHE_SPACE']}"


def kv_bytes_per_token(config: Any, tp: int, pp: int, serve: Mapping[str, Any]) -> int | None:
    """KV cache bytes one token takes on one rank; None when the config does not say enough."""
    if not isinstance(config, Mapping):
        return None
    text = (
        {**config, **config.get("text_config", {})} if isinstance(config.get("text_config"), dict) else config
    )
    width = _dtype_bytes(serve, text)
    layers = _attention_layers(text)
    if layers is None:
        return None
    layers = math.ceil(layers / max(1, pp))
    if text.get("kv_lora_rank"):  # MLA: one compressed latent per token, not split across ranks
        return layers * (int(text["kv_lora_rank"]) + int(text.get("qk_rope_head_dim") or 0)) * width
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads") or heads
    head_dim = text.get("head_dim") or (
        text.get("hidden_size") // heads if heads and text.get("hidden_size") else None
    )
    if not kv_heads or not head_dim:
        return None
    per_rank = max(1, math.ceil(int(kv_heads) / max(1, tp)))  # vLLM replicates heads when tp > heads
    return 2 * layers * per_rank * int(head_dim) * width


def _attention_layers(config: Mapping[str, Any]) -> int | None:
    """How many layers keep a KV cache (a hybrid model's linear-attention layers do not)."""
    layers = config.get("num_hidden_layers")
    kinds = config.get("layer_types") or config.get("layers_block_type")
    if isinstance(kinds, list):
        return sum(1 for k in kinds if "attention" in str(k) and "linear" not in str(k))
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        return pattern.count("*")
    if not isinstance(layers, int):
        return None
    interval = config.get("full_attention_interval")
    return layers // int(interval) if isinstance(interval, int) and interval > 0 else layers


def _dtype_bytes(serve: Mapping[str, Any], config: Mapping[str, Any]) -> int:
    kv_dtype = str(serve.get("kv_cache_dtype", "auto"))
    if kv_dtype.startswith("fp8"):
        return 1
    dtype = str(serve.get("dtype", "auto"))
    if dtype == "auto":
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return 4 if "32" in dtype else 2
