"""What the launcher knows about the model: hybrid or not, and where that came from. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Architectures vLLM builds as hybrid (IsHybrid) whose config.json shows no layer types.
HYBRID_ARCHITECTURES = frozenset(
    {
        "BambaForCausalLM",
        "FalconH1ForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "JambaForCausalLM",
        "KimiLinearForCausalLM",
        "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM",
        "MiniMaxText01ForCausalLM",
        "NemotronHForCausalLM",
        "Plamo2ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Zamba2ForCausalLM",
    }
)
HYBRID_LAYER_TYPES = frozenset({"linear_attention", "mamba", "mamba2", "conv", "linear"})


@dataclass(frozen=True)
class ModelFacts:
    """Facts about the model that change the command, each with its source."""

    hybrid: bool | None
    source: str

    @property
    def hybrid_text(self) -> str:
        """'hybrid', 'not hybrid' or 'unknown', for the plan."""
        return {True: "hybrid", False: "not hybrid", None: "unknown"}[self.hybrid]


def facts_from_config(config: dict[str, Any], source: str) -> ModelFacts:
    """Read hybrid-ness the way vLLM's model registry would see it, from config.json."""
    text = config.get("text_config")
    sections = [config, text] if isinstance(text, dict) else [config]
    listed = config.get("architectures")
    archs = tuple(str(a) for a in listed) if isinstance(listed, list) else ()
    hybrid = any(_section_is_hybrid(s) for s in sections) or bool(HYBRID_ARCHITECTURES & set(archs))
    return ModelFacts(hybrid, source)


def _section_is_hybrid(section: dict[str, Any]) -> bool:
    types = section.get("layer_types") or section.get("layers_block_type") or ()
    if isinstance(types, list) and HYBRID_LAYER_TYPES & {str(t) for t in types}:
        return True
    return bool(section.get("hybrid_override_pattern"))


def model_facts(declared: bool | None, config: Any, source: str) -> ModelFacts:
    """Facts for the plan: the spec's `model.hybrid` wins, else the parsed config.json (None: unreadable)."""
    if declared is not None:
        return ModelFacts(declared, "model.hybrid in the spec")
    if config is None:
        return ModelFacts(None, f"{source} is not readable here")
    if not isinstance(config, dict):
        return ModelFacts(None, f"{source} is not a JSON object")
    return facts_from_config(config, source)
