"""Tiny local models, one per kind the launcher must get right: config.json and a tokenizer only.

Kinds: hybrid (Qwen3-Next, a mixture of experts with an MTP layer), dense, attention-free,
MLA (DeepSeek-V2, experts too), a plain mixture of experts (Qwen3-MoE), pooling; and a
directory without config.json (unreadable).

No weights: the conformance tier runs vLLM's config code (create_engine_config) on them,
never a forward pass. The hybrid one is the test bed's Qwen3-Next (it also has an MTP layer).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from testbed.model import write_model

COMMON: dict[str, Any] = {
    "vocab_size": 1024,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
}

CONFIGS: dict[str, dict[str, Any]] = {
    "dense": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "rope_theta": 10000.0,
    },
    "attention-free": {
        "architectures": ["Mamba2ForCausalLM"],
        "model_type": "mamba2",
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "state_size": 16,
        "expand": 2,
        "n_groups": 1,
        "num_heads": 8,
        "head_dim": 64,
        "conv_kernel": 4,
        "chunk_size": 256,
        "layer_norm_epsilon": 1e-5,
        "time_step_rank": 16,
    },
    "mla": {
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "hidden_size": 256,
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "kv_lora_rank": 64,
        "q_lora_rank": None,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "topk_method": "greedy",
        "rope_theta": 10000.0,
    },
    "moe": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 256,
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "norm_topk_prob": True,
        "mlp_only_layers": [],
        "rope_theta": 10000.0,
    },
    "pooling": {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "type_vocab_size": 2,
        "max_position_embeddings": 512,
        "hidden_act": "gelu",
        "pad_token_id": 0,
    },
}
KINDS = ("hybrid", *CONFIGS, "unreadable")


def write_models(root: Path, python: Path) -> dict[str, Path]:
    """Every kind's model directory under `root` ('unreadable' has no config.json)."""
    hybrid = root / "hybrid"
    write_model(hybrid, python)
    dirs = {"hybrid": hybrid}
    for kind, config in CONFIGS.items():
        model = root / kind
        model.mkdir(parents=True, exist_ok=True)
        (model / "config.json").write_text(json.dumps({**COMMON, **config}, indent=1))
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(hybrid / name, model / name)
        dirs[kind] = model
    dirs["unreadable"] = root / "unreadable"
    dirs["unreadable"].mkdir(exist_ok=True)
    return dirs
