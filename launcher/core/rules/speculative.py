"""Derived settings of speculative decoding."""

from __future__ import annotations

from launcher.core.argv import json_arg
from launcher.core.rules.base import Decision, Inputs, RuleProblem


def speculative(inputs: Inputs) -> Decision:
    """The number of speculative tokens, explicit: it shapes the mamba state."""
    config = inputs.explicit("speculative_config")
    option = inputs.catalog.options["speculative_config"]
    if not isinstance(config, dict):
        raise RuleProblem(
            "speculative_config", "must be a mapping, e.g. {method: mtp, num_speculative_tokens: 3}"
        )
    tokens = config.get("num_speculative_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        raise RuleProblem(
            "speculative_config",
            "needs an explicit num_speculative_tokens (a positive integer)",
            "it sets the mamba state shapes; vLLM would derive it per node from the model's "
            "num_nextn_predict_layers",
        )
    return Decision(tokens, (f"{option.flag}={json_arg(config)}",))
