#!/usr/bin/env python3
"""What one vLLM release offers of the APIs spark-launch's node scripts use, as JSON.

    VENV/bin/python scripts/release_apis.py     # run by `make release` with each release's python

Standard library and vLLM only (it runs with the release's own python). For each API the
probe (launcher/node/scripts/probe.py) and the catalog generator (learn_catalog.py, traits.py)
reach, whether this release has it; and the engine's environment variables (vllm/envs.py),
those it knows and those it refuses as removed. `make release` compares two releases' answers.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys

# (dotted name, who uses it): a module, then attributes; a trailing field of a config class
# counts when it is a dataclass field.
APIS = (
    ("vllm.entrypoints.cli.serve.ServeSubcommand", "probe, learn_catalog: the `vllm serve` parser"),
    ("vllm.utils.argparse_utils.FlexibleArgumentParser", "probe: the parser class (0.32 and later)"),
    ("vllm.utils.FlexibleArgumentParser", "probe: the parser class (before the utils split)"),
    ("vllm.engine.arg_utils.AsyncEngineArgs.from_cli_args", "probe: resolve"),
    ("vllm.engine.arg_utils.AsyncEngineArgs.create_engine_config", "probe: resolve"),
    ("vllm.usage.usage_lib.UsageContext.OPENAI_API_SERVER", "probe: resolve"),
    ("vllm.config.VllmConfig.compute_hash", "probe: vLLM's config hash (up to 0.33)"),
    ("vllm.config.VllmConfig.compile_factors", "probe: vLLM's config hash (from 0.34)"),
    ("vllm.config.utils.hash_config", "probe: vLLM's config hash (from 0.34)"),
    ("vllm.config.CompilationConfig.mode", "probe: compilation_mode"),
    ("vllm.config.CompilationConfig.level", "probe: compilation_mode (before the rename)"),
    ("vllm.config.CacheConfig.__pydantic_fields__", "learn_catalog: the options' bounds"),
    ("vllm.model_executor.models.registry.ModelRegistry", "traits: the architectures"),
    ("vllm.model_executor.models.registry._ModelInfo.from_model_cls", "traits: each architecture's traits"),
    ("vllm.model_executor.models.config.MODELS_CONFIG_MAP", "traits: the config hooks"),
    ("vllm.model_executor.models.config.MambaModelConfig", "traits: the mamba hook"),
    (
        "vllm.transformers_utils.model_arch_config_convertor.ModelArchConfigConvertorBase.is_deepseek_mla",
        "traits: the MLA model types",
    ),
    ("vllm.config.speculative.SpeculativeMethod", "traits: the speculative methods"),
    ("vllm.config.speculative.MTPModelTypes", "traits: the MTP methods"),
    ("vllm.envs.environment_variables", "release machine: the engine's variables"),
    ("vllm.envs.removed_environment_variables", "release machine: the variables a release refuses"),
)


def has(dotted: str) -> bool:
    """True when the longest importable prefix of `dotted` has every remaining attribute."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            fields = getattr(obj, "__dataclass_fields__", None) or {}
            if name in fields and not hasattr(obj, name):
                obj = fields[name]
                continue
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def main() -> int:
    """Print the answer (one JSON object)."""
    apis = {name: {"present": has(name), "used_by": used_by} for name, used_by in APIS}
    from vllm import envs

    known = sorted(getattr(envs, "environment_variables", {}))
    removed = sorted(getattr(envs, "removed_environment_variables", {}))
    speculative = importlib.import_module("vllm.config.speculative").SpeculativeConfig
    keys = sorted(f.name for f in dataclasses.fields(speculative) if f.init)
    print(json.dumps({"apis": apis, "env": known, "env_removed": removed, "speculative_keys": keys}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
