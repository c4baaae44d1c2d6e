"""The settings vLLM would derive on each node, decided once for all nodes: a table.

Each rule names the setting, the vLLM releases it applies to, a pure function deciding
the value and the argv that pins it, the reason shown to the user and the vLLM source it
mirrors. A spec's explicit value wins, unless it is a value vLLM would silently change or
that would make the nodes diverge: then the rule raises a Problem saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from launcher.argv import json_arg
from launcher.catalog import Catalog, Option, parse_version
from launcher.errors import Problem
from launcher.model import ModelFacts
from launcher.spec import Spec

DEFAULT_MASTER_PORT = 29501
DEFAULT_API_PORT = 8000


class RuleProblem(Exception):
    """A spec value a rule cannot accept; carries the Problem to report."""

    def __init__(self, key: str | tuple[str, ...], message: str, hint: str | None = None) -> None:
        super().__init__(message)
        path = key if isinstance(key, tuple) else ("serve", key)
        self.problem = Problem(path, message, hint)


@dataclass
class Inputs:
    """What rules decide from: the spec, the catalog, the model, earlier decisions."""

    spec: Spec
    catalog: Catalog
    facts: ModelFacts
    version: tuple[int, ...]
    resolved: dict[str, Any] = field(default_factory=dict)

    def explicit(self, key: str) -> Any:
        """The spec's own `serve` value for `key`, or None."""
        return self.spec.serve.get(key)

    @property
    def pooling(self) -> bool:
        """True when the spec asks for a pooling runner (vLLM's defaults differ there)."""
        return self.spec.serve.get("runner") == "pooling" or "convert" in self.spec.serve


@dataclass(frozen=True)
class Decision:
    """A rule's outcome: the value, the argv pinning it (same on all nodes), a note."""

    value: Any
    args: tuple[str, ...] = ()
    note: str | None = None


@dataclass(frozen=True)
class Rule:
    """One derived setting: where it applies, how it is decided, and why."""

    setting: str
    versions: str  # e.g. ">=0.29,<0.33"; empty means every release
    decide: Callable[[Inputs], Decision]
    reason: str
    mirrors: str
    owns: tuple[str, ...] = ()  # serve keys this rule renders itself
    when: Callable[[Inputs], bool] = lambda _: True

    def applies(self, inputs: Inputs) -> bool:
        """True when this rule is in force for the spec's vLLM release and model."""
        return in_range(inputs.version, self.versions) and self.when(inputs)


def in_range(version: tuple[int, ...], spec: str) -> bool:
    """True when `version` satisfies every clause of `spec` (">=0.29,<0.33")."""
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        op = clause.rstrip("0123456789.")
        bound = parse_version(clause[len(op) :])
        ok = {">=": version >= bound, "<": version < bound, "<=": version <= bound, ">": version > bound}[op]
        if not ok:
            return False
    return True


def bool_args(option: Option, value: bool) -> tuple[str, ...]:
    """The argv pinning a boolean option to `value`, in the form this release accepts."""
    if value:
        return (option.flag,)
    if option.negative:
        return (option.negative[0],)
    return ()


def _fixed(setting: str, value: Callable[[Inputs], Any]) -> Callable[[Inputs], Decision]:
    def decide(inputs: Inputs) -> Decision:
        v = value(inputs)
        return Decision(v, (inputs.catalog.options[setting].flag + f"={v}",))

    return decide


def _int_setting(key: str, default: int) -> Callable[[Inputs], Decision]:
    def decide(inputs: Inputs) -> Decision:
        value = inputs.explicit(key)
        value = default if value is None else value
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
            raise RuleProblem(key, f"must be a port number, got {value!r}")
        return Decision(value, (inputs.catalog.options[key].flag + f"={value}",))

    return decide


def _prefix_caching(inputs: Inputs) -> Decision:
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


def _mamba_mode_flag(inputs: Inputs) -> Decision:
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


def _mamba_mode_implied(inputs: Inputs) -> Decision:
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


def _hybrid_or_unknown(inputs: Inputs) -> bool:
    return inputs.facts.hybrid is not False


def _chunked_prefill(inputs: Inputs) -> Decision:
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


def _speculative(inputs: Inputs) -> Decision:
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


def _mamba_block_size(inputs: Inputs) -> Decision:
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


def _parallel(inputs: Inputs) -> Decision:
    nodes = inputs.spec.nodes
    sizes = {
        k: inputs.explicit(k) or 1
        for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
    }
    for key, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise RuleProblem(key, f"must be a positive integer, got {value!r}")
    if len({n.gpus for n in nodes}) > 1:
        raise RuleProblem(
            "tensor_parallel_size",
            "nodes have different GPU counts; vLLM's mp backend "
            "runs the same number of workers on every node",
            "use nodes with equal gpus",
        )
    world = sizes["tensor_parallel_size"] * sizes["pipeline_parallel_size"] * sizes["data_parallel_size"]
    gpus = sum(n.gpus for n in nodes)
    if world != gpus:
        fitting = gpus // (sizes["pipeline_parallel_size"] * sizes["data_parallel_size"]) or 1
        raise RuleProblem(
            "tensor_parallel_size",
            f"tensor x pipeline x data parallel = {world}, but the {len(nodes)} node(s) have {gpus} GPU(s)",
            f"e.g. tensor_parallel_size: {fitting}",
        )
    tp = sizes["tensor_parallel_size"]
    return Decision(tp, (f"{inputs.catalog.options['tensor_parallel_size'].flag}={tp}",))


RULES: tuple[Rule, ...] = (
    Rule(
        "distributed_executor_backend",
        "",
        _fixed("distributed_executor_backend", lambda _: "mp"),
        "multi-node tensor parallel without Ray: every node runs its own workers",
        "vllm/entrypoints/cli/serve.py (run_headless)",
        owns=("distributed_executor_backend",),
    ),
    Rule(
        "nnodes",
        "",
        _fixed("nnodes", lambda i: len(i.spec.nodes)),
        "the number of nodes in the spec",
        "vllm/config/parallel.py (nnodes)",
        owns=("nnodes",),
    ),
    Rule(
        "master_addr",
        "",
        _fixed("master_addr", lambda i: i.spec.head.address),
        "rank 0's fabric address; vLLM's default 127.0.0.1 would point each node at itself",
        "vllm/config/parallel.py (master_addr)",
        owns=("master_addr",),
    ),
    Rule(
        "master_port",
        "",
        _int_setting("master_port", DEFAULT_MASTER_PORT),
        "the rendezvous port, written out so no node relies on its own default",
        "vllm/config/parallel.py (master_port)",
        owns=("master_port",),
    ),
    Rule(
        "port",
        "",
        _int_setting("port", DEFAULT_API_PORT),
        "the head's API port, written out so `up` and `verify` know where to look",
        "vllm/entrypoints/openai/cli_args.py (port)",
        owns=("port",),
    ),
    Rule(
        "tensor_parallel_size",
        "",
        _parallel,
        "tensor x pipeline x data parallel must equal the GPUs of all nodes",
        "vllm/config/parallel.py (world_size)",
        owns=("tensor_parallel_size",),
    ),
    Rule(
        "enable_prefix_caching",
        "",
        _prefix_caching,
        "unset, each node derives it from its own model config (is_prefix_caching_supported: on "
        "for generative and hybrid models); pinned so every node agrees",
        "vllm/engine/arg_utils.py (_set_default_chunked_prefill_and_prefix_caching_args)",
        owns=("enable_prefix_caching",),
    ),
    Rule(
        "mamba_cache_mode",
        "<0.33",
        _mamba_mode_flag,
        "hybrid model: prefix caching on means 'align', off means 'none'; a node that derives "
        "the other mode gets a different KV cache spec and the engine dies at start-up",
        "vllm/model_executor/models/config.py (MambaModelConfig.verify_and_update_config)",
        owns=("mamba_cache_mode",),
        when=_hybrid_or_unknown,
    ),
    Rule(
        "mamba_cache_mode",
        ">=0.33",
        _mamba_mode_implied,
        "implied by prefix caching (--mamba-cache-mode is a deprecated no-op from 0.33); "
        "shown so the plan says what each node will run",
        "vllm/model_executor/models/config.py (MambaModelConfig.verify_and_update_config)",
        owns=("mamba_cache_mode",),
        when=_hybrid_or_unknown,
    ),
    Rule(
        "enable_chunked_prefill",
        "",
        _chunked_prefill,
        "unset, each node derives it from its model config; align mode requires it",
        "vllm/engine/arg_utils.py (_set_default_chunked_prefill_and_prefix_caching_args)",
        owns=("enable_chunked_prefill",),
    ),
    Rule(
        "mamba_block_size",
        "",
        _mamba_block_size,
        "hybrid model: only meaningful with prefix caching (align mode)",
        "vllm/config/vllm.py (validate_mamba_block_size)",
        owns=("mamba_block_size",),
        when=lambda i: i.explicit("mamba_block_size") is not None and i.facts.hybrid is not False,
    ),
    Rule(
        "num_speculative_tokens",
        "",
        _speculative,
        "speculative decoding: the number of tokens changes the mamba state shapes, so it is "
        "written out rather than derived per node from the model",
        "vllm/config/speculative.py (num_speculative_tokens)",
        owns=("speculative_config",),
        when=lambda i: i.explicit("speculative_config") is not None,
    ),
)
