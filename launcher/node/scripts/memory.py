"""This node's memory as the memory guard needs it: /proc/meminfo, the GPUs' own memory, and
the model's KV-cache shape from its config.json. A library of the scripts that use it.

A GB10 (DGX Spark) reports no dedicated GPU memory: `nvidia-smi` prints "[N/A]" (or "Not
Supported") for it, because the GPU uses the system's memory. Such a GPU is kept with a
total of None, which is how the launcher tells unified memory from a GPU of its own.
"""

from __future__ import annotations

import json
import os
import subprocess

from .common import ran

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

MEMINFO_KEYS = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "Shmem", "SReclaimable")
GPU_QUERY = [
    "nvidia-smi",
    "--query-gpu=name,memory.total,memory.free,driver_version",
    "--format=csv,noheader,nounits",
]
NOT_REPORTED = ("[n/a]", "n/a", "not supported", "[not supported]", "")
CONFIG_KEYS = (
    "model_type",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "layer_types",
    "layers_block_type",
    "hybrid_override_pattern",
    "full_attention_interval",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "torch_dtype",
    "dtype",
    "max_position_embeddings",
)


def parse_meminfo(text: str) -> dict[str, int]:
    """The keys the guard uses from /proc/meminfo, in bytes."""
    found = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if key in MEMINFO_KEYS and words and words[0].isdigit():
            found[key] = int(words[0]) * (1024 if words[1:] == ["kB"] else 1)
    return found


def _mib(text: str) -> int | None:
    """A MiB figure as bytes; None for the ways nvidia-smi says it has none."""
    value = text.strip()
    if value.lower() in NOT_REPORTED:
        return None
    try:
        return int(float(value.split()[0]) * 1024 * 1024)
    except ValueError:
        return None


def parse_gpu_query(text: str) -> list[dict[str, Any]]:
    """One entry per GPU from GPU_QUERY's output: name, total and free bytes (None: not reported), driver."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) >= 4 and fields[0]:
            gpus.append(
                {"name": fields[0], "total": _mib(fields[1]), "free": _mib(fields[2]), "driver": fields[3]}
            )
    return gpus


def gpu_memory() -> list[dict[str, Any]] | None:
    """The GPUs and their memory as nvidia-smi reports them; None when there is no nvidia-smi."""
    try:
        done = ran(GPU_QUERY, 20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_gpu_query(done.stdout) if done.returncode == 0 else None


def model_config(path: str) -> dict[str, Any] | None:
    """The config.json fields that size the KV cache (a multimodal model's text_config too)."""
    try:
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    subset = {k: config[k] for k in CONFIG_KEYS if k in config}
    text = config.get("text_config")
    if isinstance(text, dict):
        subset["text_config"] = {k: text[k] for k in CONFIG_KEYS if k in text}
    return subset


def memory_facts(model_path: str | None) -> dict[str, Any]:
    """Everything the memory guard weighs on this node."""
    try:
        with open("/proc/meminfo") as f:
            meminfo = parse_meminfo(f.read())
    except OSError:
        meminfo = {}
    return {
        "meminfo": meminfo,
        "gpus": gpu_memory(),
        "model_config": model_config(model_path) if model_path else None,
    }
