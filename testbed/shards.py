"""A model directory with real weight files: safetensors shards of random bytes and their index.

For copying tests and benchmarks (vLLM never loads it): the tiny model's config and
tokenizer, plus `shards` files of about `shard_bytes` each, named and indexed the way
the Hugging Face Hub ships large models.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

CHUNK = 8 << 20


def write_sharded_model(target: Path, tokenizer_from: Path, shards: int, shard_bytes: int) -> list[str]:
    """Write the model directory (replacing any); the shard names."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_from / name, target / name)
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    weight_map = {}
    for i, name in enumerate(names):
        tensor = f"model.layers.{i}.weight"
        _write_shard(target / name, tensor, shard_bytes)
        weight_map[tensor] = name
    index = {"metadata": {"total_size": shards * shard_bytes}, "weight_map": weight_map}
    (target / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return names


def _write_shard(path: Path, tensor: str, size: int) -> None:
    """One safetensors file holding one bf16 tensor of random bytes."""
    elements = size // 2
    entry = {"dtype": "BF16", "shape": [elements], "data_offsets": [0, 2 * elements]}
    header = json.dumps({tensor: entry, "__metadata__": {}}).encode()
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        left = 2 * elements
        while left:
            n = min(CHUNK, left)
            f.write(os.urandom(n))
            left -= n
