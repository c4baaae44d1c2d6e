"""What the plan knows about the model: vLLM's own traits for its architecture, and whence. Pure.

The architecture comes from the model's config.json (read where the plan is made, or from
the head node); its traits from the release's catalog (generated from vLLM's model
registry). `model.kind` in the spec stands in for a config.json the plan cannot read (the
older `model.hybrid: true` too); when both are known and disagree, the catalog wins and the
spec is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from launcher.core.spec.sections import ModelSection
from launcher.core.vllm.catalog import Catalog
from launcher.errors import Problem

# ModelConfig.is_hybrid: a hybrid architecture whose layer_types are all attention has no
# mamba layer (granite-4.0-micro), and vLLM builds it as a plain decoder.
ATTENTION_LAYERS = ("attention", "full_attention")
# The files a model's weights are kept in (the plan sizes them; `check` wants one of them).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# Where config.json keeps the number of MTP layers (SpeculativeConfig.hf_config_override).
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """Facts about the model that change the command; None where the launcher cannot tell."""

    source: str
    architecture: str | None = None
    hybrid: bool | None = None  # ModelConfig.is_hybrid
    attention_free: bool | None = None  # ModelConfig.is_attention_free
    mamba: bool | None = None  # vLLM derives a mamba cache mode for it (mamba layers)
    pooling: bool | None = None  # `--runner auto` resolves to pooling
    encoder_decoder: bool | None = None
    mla: bool | None = None  # ModelConfig.use_mla
    mtp_layers: int | None = None
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def kind(self) -> str | None:
        """hybrid, attention-free, encoder-decoder, decoder; None when not known."""
        if self.hybrid:
            return "hybrid"
        if self.attention_free:
            return "attention-free"
        if self.encoder_decoder:
            return "encoder-decoder"
        if self.hybrid is False and self.attention_free is False and self.encoder_decoder is False:
            return "decoder"
        return None

    @property
    def text(self) -> str:
        """One line for the plan: kind, architecture, MTP layers."""
        text = f"{self.kind or 'kind unknown'} ({self.architecture or 'architecture unknown'})"
        return text + (f", {self.mtp_layers} MTP layer(s)" if self.mtp_layers else "")


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """The model's small files the plan reads (config.json, whether modules.json is there), and where."""

    path: str  # the model directory
    config: Any  # config.json parsed; None when it is not there or not readable
    sentence_transformers: bool = False  # modules.json: vLLM runs it as a pooling model
    node: str | None = None  # the node they were read on; None: where spark-launch runs
    sha256: str | None = None  # of config.json's bytes, for the nodes' manifests to confirm
    cached_at: float | None = None  # when read from the node, for a copy kept on this machine
    weight_bytes: int | None = None  # the weight files' size; None when there are none to see

    @property
    def source(self) -> str:
        """Where config.json was read, for the plan's reasons."""
        where = f"{self.path.rstrip('/')}/config.json"
        if self.node is None:
            return where
        return f"{self.node}:{where}" + (" (as read earlier, kept on this machine)" if self.cached_at else "")


def facts_of(files: ModelFiles, model: ModelSection, catalog: Catalog) -> ModelFacts:
    """What the files and the spec's model section tell this release's vLLM."""
    return model_facts(
        files.config,
        files.source,
        catalog,
        kind=model.kind,
        hybrid=model.hybrid,
        sentence_transformers=files.sentence_transformers,
        where="here" if files.node is None else f"on {files.node}",
    )


KINDS = ("decoder", "hybrid", "attention-free", "pooling", "encoder-decoder")


def kind_facts(kind: str | None, source: str) -> ModelFacts:
    """Facts for a model of a known kind (one of KINDS) or None."""
    if kind is None:
        return ModelFacts(source)
    return ModelFacts(
        source,
        hybrid=kind == "hybrid",
        attention_free=kind == "attention-free",
        mamba=kind in ("hybrid", "attention-free"),
        pooling=kind == "pooling",
        encoder_decoder=kind == "encoder-decoder",
        mla=False,
    )


def model_facts(
    config: Any,
    source: str,
    catalog: Catalog,
    *,
    kind: str | None = None,
    hybrid: bool | None = None,
    sentence_transformers: bool = False,
    where: str = "here",
) -> ModelFacts:
    """Facts for the plan: config.json (None: unreadable) looked up in the catalog, then the
    spec's model.kind (or the older model.hybrid), which must agree with what vLLM makes of it."""
    if not isinstance(config, dict):
        why = f"{source} is not readable {where}" if config is None else f"{source} is not a JSON object"
        facts = ModelFacts(why)
    else:
        facts = facts_from_config(config, source, catalog, sentence_transformers)
    if kind is not None:
        return _with_kind(facts, kind, catalog)
    return _with_override(facts, hybrid, catalog)


def facts_from_config(
    config: dict[str, Any], source: str, catalog: Catalog, sentence_transformers: bool = False
) -> ModelFacts:
    """What this release's vLLM makes of a config.json: its architecture's registry traits."""
    text = config.get("text_config")
    text = text if isinstance(text, dict) else config
    listed = config.get("architectures")
    archs = [str(a) for a in listed] if isinstance(listed, list) else []
    arch = next((a for a in archs if a in catalog.models), None)
    general = ModelFacts(
        source,
        arch or (archs[0] if archs else None),
        encoder_decoder=bool(config.get("is_encoder_decoder") or text.get("is_encoder_decoder")),
        mla=_mla(text, catalog),
        mtp_layers=_mtp_layers(config, text),
    )
    if arch is None:
        named = ", ".join(archs) or "no architectures"
        note = (
            f"model: {named} ({source}) is not in vLLM {catalog.version}'s model registry: "
            "the plan cannot tell the model's kind"
        )
        return replace(general, pooling=True if sentence_transformers else None, notes=(note,))
    traits = catalog.models[arch]
    layer_types = config.get("layer_types")
    attention_only = isinstance(layer_types, list) and all(t in ATTENTION_LAYERS for t in layer_types)
    hybrid = traits.hybrid and not attention_only
    return replace(
        general,
        hybrid=hybrid,
        attention_free=traits.attention_free,
        mamba=hybrid or traits.mamba_hook,
        # ModelConfig._get_default_runner_type: sentence-transformers files, then the registry.
        pooling=sentence_transformers or traits.pooling or (None if not traits.generate else False),
    )


def real_kind(facts: ModelFacts) -> str | None:
    """The kind vLLM builds the model as (one of KINDS), as far as the facts tell."""
    return "pooling" if facts.pooling else facts.kind


def _with_kind(facts: ModelFacts, declared: str, catalog: Catalog) -> ModelFacts:
    """Apply `model.kind`: it stands in for an unknown model, and must agree with a known one."""
    found = real_kind(facts)
    if found is None:
        notes = tuple(n.replace("cannot tell", "takes model.kind for") for n in facts.notes)
        stand_in = kind_facts(declared, f"model.kind in the spec ({facts.source})")
        return replace(stand_in, architecture=facts.architecture, mtp_layers=facts.mtp_layers, notes=notes)
    if found == declared:
        return facts
    problem = Problem(
        ("model", "kind"),
        f"is {declared}, but vLLM {catalog.version} builds {facts.architecture} as {found} "
        f"(its model registry, for {facts.source})",
        f"write model.kind: {found}, or remove it: the plan reads the architecture from config.json",
    )
    return replace(facts, problems=(problem,))


def _with_override(facts: ModelFacts, declared: bool | None, catalog: Catalog) -> ModelFacts:
    """Apply `model.hybrid`: it fills in an unknown architecture, and must agree with a known one."""
    if declared is None:
        return facts
    if facts.hybrid is None:
        # The override alone: true means a generative hybrid model, false says nothing more.
        source = f"model.hybrid in the spec ({facts.source})"
        facts = replace(
            facts, notes=tuple(n.replace("cannot tell", "takes model.hybrid for") for n in facts.notes)
        )
        if declared:
            return replace(
                facts,
                source=source,
                hybrid=True,
                attention_free=False,
                mamba=True,
                pooling=bool(facts.pooling),
                encoder_decoder=False,
            )
        return replace(facts, source=source, hybrid=False)
    if facts.hybrid == declared:
        return facts
    builds = "as hybrid" if facts.hybrid else "without mamba layers mixed with attention"
    problem = Problem(
        ("model", "hybrid"),
        f"is {str(declared).lower()}, but vLLM {catalog.version} builds {facts.architecture} {builds} "
        f"(its model registry, for {facts.source})",
        "remove model.hybrid: the plan reads the architecture from config.json",
    )
    return replace(facts, problems=(problem,))


def _mla(text: dict[str, Any], catalog: Catalog) -> bool:
    """ModelConfig.use_mla for vLLM's own implementations (is_deepseek_mla)."""
    if text.get("model_type") not in catalog.mla_model_types or text.get("is_causal") is False:
        return False
    if "compress_ratios" in text:  # the DeepSeek-V4 layout
        return text.get("head_dim") is not None
    return text.get("kv_lora_rank") is not None


def _mtp_layers(config: dict[str, Any], text: dict[str, Any]) -> int | None:
    for section in (config, text):
        for key in MTP_KEYS:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None
