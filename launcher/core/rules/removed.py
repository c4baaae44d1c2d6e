"""Inputs a release removed and refuses: engine variables, keys of --speculative-config. Pure.

A spec that still writes one would plan, and every node's vLLM would refuse to start (or, for
a key vLLM only warns about, run without it). Each entry names the releases that refuse it,
what they say, the fix and the vLLM source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.rules.base import in_range
from launcher.core.spec.versions import Version
from launcher.errors import Problem


@dataclass(frozen=True, slots=True)
class Removed:
    """One input a release range refuses: why, the fix, the source; `allowed` values still pass."""

    name: str
    versions: str
    why: str
    hint: str
    source: str
    allowed: tuple[str, ...] = ()


ENV: tuple[Removed, ...] = (
    Removed(
        "VLLM_USE_V2_MODEL_RUNNER",
        ">=0.34",
        "Model Runner V1 has been removed: every node's vLLM refuses any value but 1 at start-up "
        "(and 1 is redundant)",
        "remove VLLM_USE_V2_MODEL_RUNNER from env: the V2 model runner is the only one",
        "vllm/platforms/interface.py (Platform.validate_environ); "
        "vllm/engine/arg_utils.py (EngineArgs.create_engine_config: calls it)",
        allowed=("1",),
    ),
    Removed(
        "VLLM_MARLIN_INPUT_DTYPE",
        ">=0.34",
        "removed: Marlin no longer supports 8-bit activations, and every node's vLLM refuses it",
        "remove it; use serve.quantization: humming with VLLM_HUMMING_INPUT_QUANT_CONFIG",
        "vllm/envs.py (removed_environment_variables); "
        "vllm/platforms/interface.py (Platform.validate_environ)",
    ),
)

SPECULATIVE_KEYS: tuple[Removed, ...] = tuple(
    Removed(
        key,
        ">=0.34",
        "is no longer a key of --speculative-config: vLLM refuses unknown keys "
        "(SpeculativeConfig: 'Unexpected keyword argument')",
        f"remove {key} from serve.speculative_config",
        "vllm/config/speculative.py (SpeculativeConfig: no such field); "
        "vllm/config/utils.py (config: forbids extra keys)",
    )
    for key in ("disable_padded_drafter_batch", "use_heterogeneous_vocab")
)


def env_problems(env: Mapping[str, Any], version: Version, release: str) -> list[Problem]:
    """The spec's engine variables that vLLM `release` (the spec's) refuses."""
    problems = []
    for entry in ENV:
        value = env.get(entry.name)
        if value is None or not in_range(version, entry.versions) or str(value) in entry.allowed:
            continue
        problems.append(
            Problem(
                ("env", entry.name),
                f"vLLM {release} refuses {entry.name}={value}: {entry.why} [{entry.source}]",
                entry.hint,
            )
        )
    return problems


def speculative_problems(config: Mapping[str, Any], version: Version, release: str) -> list[Problem]:
    """The keys of the spec's speculative_config that vLLM `release` no longer has."""
    return [
        Problem(
            ("serve", "speculative_config", entry.name),
            f"{entry.why} in vLLM {release} [{entry.source}]",
            entry.hint,
        )
        for entry in SPECULATIVE_KEYS
        if entry.name in config and in_range(version, entry.versions)
    ]
