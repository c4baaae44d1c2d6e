"""Derived settings of the KV cache: prefix caching, mamba cache mode, chunked prefill, block size."""

from __future__ import annotations

from launcher.core.rules.base import Decision, Inputs, RuleProblem, bool_args


def prefix_caching(inputs: Inputs) -> Decision:
    """Pinned either way: unset, each node would derive it from its own model config."""
    option = inputs.catalog.options["enable_prefix_caching"]
    explicit = inputs.explicit("enable_prefix_caching")
    if explicit is None:
        if inputs.pooling:
            raise RuleProblem(
                "enable_prefix_caching",
                "must be set explicitly for a pooling model",
                "vLLM's default depends on the pooler; write true or false",
            )
        explicit = True
    if not isinstance(explicit, bool):
        raise RuleProblem("enable_prefix_caching", f"expected true or false, got {explicit!r}")
    inputs.resolved["enable_prefix_caching"] = explicit
    return Decision(explicit, bool_args(option, explicit))


def _mode_for(inputs: Inputs) -> str:
    return "align" if inputs.resolved["enable_prefix_caching"] else "none"


def mamba_mode_flag(inputs: Inputs) -> Decision:
    """<= 0.32: the flag is live; pin the mode vLLM would set, refuse one it would change."""
    if inputs.facts.hybrid is None:
        raise RuleProblem(
            ("model", "hybrid"),
            "cannot tell whether the model is hybrid, and the command differs (--mamba-cache-mode)",
            f"set model.hybrid: true or false ({inputs.facts.source})",
        )
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
        pc = "on" if inputs.resolved["enable_prefix_caching"] else "off"
        raise RuleProblem(
            "mamba_cache_mode",
            f"{explicit!r} cannot take effect: with prefix caching {pc} "
            f"vLLM turns it into {mode!r} (MambaModelConfig.verify_and_update_config)",
            f"remove mamba_cache_mode, or set enable_prefix_caching: {str(mode == 'align').lower()}",
        )
    inputs.resolved["mamba_cache_mode"] = mode
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
            "remove mamba_cache_mode and set enable_prefix_caching instead",
        )
    if explicit is not None:
        note = (
            f"serve.mamba_cache_mode dropped: a deprecated no-op in vLLM {inputs.catalog.version} (it agrees)"
        )
    if inputs.facts.hybrid is None:
        mode = f"{mode} if the model is hybrid"
    inputs.resolved["mamba_cache_mode"] = mode
    return Decision(mode, (), note)


def hybrid_or_unknown(inputs: Inputs) -> bool:
    """True unless the model is known not to be hybrid."""
    return inputs.facts.hybrid is not False


def chunked_prefill(inputs: Inputs) -> Decision:
    """Pinned either way; a hybrid model with prefix caching cannot have it off."""
    option = inputs.catalog.options["enable_chunked_prefill"]
    explicit = inputs.explicit("enable_chunked_prefill")
    needs = inputs.facts.hybrid is not False and inputs.resolved["enable_prefix_caching"]
    if explicit is False and needs:
        raise RuleProblem(
            "enable_chunked_prefill",
            "a hybrid model with prefix caching needs chunked "
            "prefill (mamba cache mode align); vLLM asserts it",
            "remove enable_chunked_prefill, or turn prefix caching off",
        )
    if explicit is None:
        if inputs.pooling:
            raise RuleProblem(
                "enable_chunked_prefill",
                "must be set explicitly for a pooling model",
                "vLLM's default depends on the pooler; write true or false",
            )
        explicit = True
    if not isinstance(explicit, bool):
        raise RuleProblem("enable_chunked_prefill", f"expected true or false, got {explicit!r}")
    return Decision(explicit, bool_args(option, explicit))


def mamba_block_size(inputs: Inputs) -> Decision:
    """Only meaningful in align mode; vLLM refuses it without prefix caching."""
    value = inputs.explicit("mamba_block_size")
    if not inputs.resolved["enable_prefix_caching"]:
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
