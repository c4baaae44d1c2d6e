"""Derived settings of speculative decoding."""

from __future__ import annotations

from launcher.core.rules.base import Decision, Inputs, RuleProblem
from launcher.core.vllm.argv import json_arg


def speculative(inputs: Inputs) -> Decision:
    """The number of speculative tokens, explicit: it shapes the mamba state."""
    config = inputs.explicit("speculative_config")
    option = inputs.catalog.options["speculative_config"]
    version = inputs.catalog.version
    if not isinstance(config, dict):
        raise RuleProblem(
            "speculative_config", "must be a mapping, e.g. {method: mtp, num_speculative_tokens: 3}"
        )
    method = config.get("method")
    methods = inputs.catalog.speculative_methods
    if method is not None and methods and method not in methods:
        raise RuleProblem(
            "speculative_config",
            f"method {method!r} is not a speculative method of vLLM {version}",
            f"choices: {', '.join(methods)}",
        )
    tokens = config.get("num_speculative_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        raise RuleProblem(
            "speculative_config",
            "needs an explicit num_speculative_tokens (a positive integer)",
            f"without it vLLM {version} refuses the config unless it names a draft model whose "
            "config has n_predict (SpeculativeConfig); it also sets the mamba state shapes",
        )
    return Decision(tokens, (f"{option.flag}={json_arg(config)}",))
