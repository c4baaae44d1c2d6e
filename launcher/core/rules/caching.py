"""Derived settings of the KV cache: prefix caching, mamba cache mode, chunked prefill, block size.

Left unset, a setting is pinned to the value the release's vLLM would choose by itself for
the model's kind (vllm/config/model.py: is_prefix_caching_supported,
is_chunked_prefill_supported); where that choice depends on what the plan cannot see,
the spec must write the value out.
"""

from __future__ import annotations

from launcher.core.rules.base import Decision, Inputs, RuleProblem, bool_args

POOLER = (
    "vLLM's default for a pooling model depends on its pooler (the pooling type, and whether "
    "the attention is causal); write true or false"
)

DEVICE = (
    "vLLM's choice for an MLA model depends on the device: its CPU platform turns chunked "
    "prefill and prefix caching off (cpu.py, unless the CPU has AMX), a GPU keeps the model's "
    "default; write true or false"
)


# How to settle a setting that depends on the model's kind, where the plan cannot see it.
SETTLE = (
    "`spark-launch plan --from-head SPEC` reads the model's config.json on the head node "
    "(check, up and the other commands that reach the nodes do so by themselves); or write "
    "model.kind: decoder | hybrid | attention-free | pooling | encoder-decoder; or write true or false"
)


class KindUnknown(str):
    """Why a default cannot be known: the model's kind is not (settled by SETTLE)."""


def _unknown_kind(inputs: Inputs) -> str:
    return KindUnknown(f"depends on the model's kind, which the plan cannot tell ({inputs.facts.source})")


def default_prefix_caching(inputs: Inputs) -> bool | str:
    """vLLM's own choice when unset, or (a str) why the plan cannot know it."""
    if inputs.pooling:
        return POOLER
    if inputs.facts.mla:
        return DEVICE
    kind = inputs.facts.kind
    if inputs.pooling is None or kind is None:
        return _unknown_kind(inputs)
    # Attention-free and encoder-decoder models: off ("still experimental"); the rest: on.
    return kind in ("hybrid", "decoder")


def default_chunked_prefill(inputs: Inputs) -> bool | str:
    """vLLM's own choice when unset, or (a str) why the plan cannot know it."""
    if inputs.pooling:
        return POOLER
    if inputs.facts.mla:
        return DEVICE
    if inputs.pooling is None or inputs.facts.encoder_decoder is None:
        return _unknown_kind(inputs)
    return not inputs.facts.encoder_decoder


def _explicit_bool(inputs: Inputs, key: str, default: bool | str) -> bool:
    value = inputs.explicit(key)
    if value is None:
        if isinstance(default, KindUnknown):
            raise RuleProblem(key, str(default), SETTLE)
        if isinstance(default, str):
            what = {True: "for a pooling model", False: "for this model"}[bool(inputs.pooling)]
            what = "for an MLA model" if inputs.facts.mla and not inputs.pooling else what
            raise RuleProblem(key, f"must be set explicitly {what}", default)
        value = default
    if not isinstance(value, bool):
        raise RuleProblem(key, f"expected true or false, got {value!r}", "write true or false")
    return value


def prefix_caching(inputs: Inputs) -> Decision:
    """Pinned either way: unset, each node would derive it from its own model config."""
    value = _explicit_bool(inputs, "enable_prefix_caching", default_prefix_caching(inputs))
    inputs.resolved["enable_prefix_caching"] = value
    return Decision(value, bool_args(inputs.catalog.options["enable_prefix_caching"], value))


def _mode_for(inputs: Inputs) -> str:
    return "align" if inputs.decided("enable_prefix_caching") else "none"


def _if_mamba(inputs: Inputs, mode: str) -> str:
    """The mode, said as conditional when the plan cannot tell whether the model has mamba layers."""
    return mode if inputs.facts.mamba else f"{mode} if the model has mamba layers"


def _keeps(explicit: str) -> str:
    """The hint for a mode vLLM would change: the prefix caching under which it holds."""
    return f"remove mamba_cache_mode, or set enable_prefix_caching: {str(explicit == 'align').lower()}"


def mamba_mode_flag(inputs: Inputs) -> Decision:
    """<= 0.32: the flag is live; pin the mode vLLM would set, refuse one it would change."""
    mode = _mode_for(inputs)
    explicit = inputs.explicit("mamba_cache_mode")
    option = inputs.catalog.options["mamba_cache_mode"]
    if explicit is not None and option.choices is not None and str(explicit) not in option.choices:
        raise RuleProblem(
            "mamba_cache_mode",
            f"{explicit!r} does not exist in vLLM {inputs.catalog.version}",
            f"choices: {', '.join(option.choices)}",
        )
    if explicit is not None and explicit != mode:
        pc = "on" if inputs.decided("enable_prefix_caching") else "off"
        raise RuleProblem(
            "mamba_cache_mode",
            f"{explicit!r} cannot take effect: with prefix caching {pc} "
            f"vLLM turns it into {mode!r} (MambaModelConfig.verify_and_update_config)",
            _keeps(str(explicit)),
        )
    inputs.resolved["mamba_cache_mode"] = mode
    if not inputs.facts.mamba:
        # Unknown model: identical flags make every node derive the same mode anyway.
        args = (f"{option.flag}={explicit}",) if explicit else ()
        return Decision(_if_mamba(inputs, mode), args)
    return Decision(mode, (f"{option.flag}={mode}",))


def mamba_mode_implied(inputs: Inputs) -> Decision:
    """>= 0.33: the flag is a deprecated no-op; the mode follows prefix caching."""
    mode = _mode_for(inputs)
    explicit = inputs.explicit("mamba_cache_mode")
    note = None
    if explicit is not None and explicit != mode:
        raise RuleProblem(
            "mamba_cache_mode",
            f"{explicit!r} contradicts prefix caching: in vLLM "
            f"{inputs.catalog.version} the mode follows --enable-prefix-caching, so it is {mode!r}",
            _keeps(str(explicit)),
        )
    if explicit is not None:
        note = (
            f"serve.mamba_cache_mode dropped: a deprecated no-op in vLLM {inputs.catalog.version} (it agrees)"
        )
    inputs.resolved["mamba_cache_mode"] = mode
    return Decision(_if_mamba(inputs, mode), (), note)


def mamba_or_unknown(inputs: Inputs) -> bool:
    """True unless the model is known to have no mamba layers (hybrid or attention-free)."""
    return inputs.facts.mamba is not False


def chunked_prefill(inputs: Inputs) -> Decision:
    """Pinned either way; a mamba model with prefix caching cannot have it off."""
    option = inputs.catalog.options["enable_chunked_prefill"]
    explicit = inputs.explicit("enable_chunked_prefill")
    if explicit is False and inputs.facts.mamba is not False and inputs.decided("enable_prefix_caching"):
        which = (
            "a model with mamba layers" if inputs.facts.mamba else "a model with mamba layers (if it is one)"
        )
        raise RuleProblem(
            "enable_chunked_prefill",
            f"{which} with prefix caching needs chunked prefill (mamba cache mode align); vLLM asserts it",
            "remove enable_chunked_prefill, or turn prefix caching off",
        )
    value = _explicit_bool(inputs, "enable_chunked_prefill", default_chunked_prefill(inputs))
    return Decision(value, bool_args(option, value))


def mamba_block_size(inputs: Inputs) -> Decision:
    """Only meaningful in align mode; vLLM refuses it without prefix caching."""
    value = inputs.explicit("mamba_block_size")
    if not inputs.decided("enable_prefix_caching"):
        raise RuleProblem(
            "mamba_block_size",
            "vLLM refuses --mamba-block-size without prefix caching",
            "remove mamba_block_size (it falls back to max_model_len)",
        )
    return Decision(
        value,
        (f"{inputs.catalog.options['mamba_block_size'].flag}={value}",),
        "the final hybrid block size is set in each worker (Platform._align_hybrid_block_size)",
    )
