"""THE table of derived settings: one row per setting vLLM would derive on each node.

To pin a new setting: write its decider next to its kin (topology, caching, speculative,
memory_split), add a row here with the releases it applies to, the reason and the vLLM source
it mirrors, and cover it in tests/core/rules and the conformance tier.

Each source names a file and a function or field of the vLLM package, as it is in the newest
supported release (0.34.0); every row was reviewed against that release's code, and the
conformance tier resolves each against every supported release. What a release changed and
what covers each change: launcher/catalogs/review-<release>.json (`make release`).
"""

from __future__ import annotations

from launcher.core.rules import caching, memory_split, speculative, topology
from launcher.core.rules.base import Rule

RULES: tuple[Rule, ...] = (
    Rule(
        "distributed_executor_backend",
        "",
        topology.fixed("distributed_executor_backend", lambda _: "mp"),
        "multi-node tensor parallel without Ray: every node runs its own workers",
        "vllm/entrypoints/cli/serve.py (run_headless)",
        owns=("distributed_executor_backend",),
        source="launcher",
        when=topology.several_nodes,
    ),
    Rule(
        "nnodes",
        "",
        topology.fixed("nnodes", lambda i: len(i.spec.nodes)),
        "the number of nodes in the spec",
        "vllm/config/parallel.py (ParallelConfig.nnodes)",
        owns=("nnodes",),
        source="launcher",
        when=topology.several_nodes,
    ),
    Rule(
        "master_addr",
        "",
        topology.fixed("master_addr", lambda i: i.spec.head.address),
        "rank 0's fabric address; vLLM's default 127.0.0.1 would point each node at itself",
        "vllm/config/parallel.py (ParallelConfig.master_addr)",
        owns=("master_addr",),
        source="launcher",
        when=topology.several_nodes,
    ),
    Rule(
        "master_port",
        "",
        topology.port_setting("master_port", topology.DEFAULT_MASTER_PORT),
        "the rendezvous port, written out so no node relies on its own default",
        "vllm/config/parallel.py (ParallelConfig.master_port)",
        owns=("master_port",),
        when=topology.several_nodes,
    ),
    Rule(
        "port",
        "",
        topology.port_setting("port", topology.DEFAULT_API_PORT),
        "the head's API port, written out so `up` and `verify` know where to look",
        "vllm/entrypoints/common/cli_args.py (FrontendArgs.port)",
        owns=("port",),
    ),
    Rule(
        "host",
        "",
        topology.listen,
        "where the head's API listens (api.listen): loopback behind an endpoint on the same node, "
        "else the node's address; vLLM's own default listens on every interface",
        "vllm/entrypoints/common/cli_args.py (FrontendArgs.host: None binds every interface)",
        owns=("host",),
        source="launcher",
    ),
    Rule(
        "tensor_parallel_size",
        "",
        topology.parallel,
        "tensor x pipeline x data parallel must equal the GPUs of all nodes",
        "vllm/config/parallel.py (ParallelConfig.world_size)",
        owns=("tensor_parallel_size",),
    ),
    Rule(
        "enable_prefix_caching",
        "",
        caching.prefix_caching,
        "left unset, each node would derive it from its own model config (is_prefix_caching_supported: "
        "on for generative decoder and hybrid models, off for attention-free and encoder-decoder "
        "ones): pinned, so every node agrees",
        "vllm/engine/arg_utils.py (EngineArgs._set_default_chunked_prefill_and_prefix_caching_args); "
        "vllm/config/model.py (ModelConfig.is_prefix_caching_supported)",
        owns=("enable_prefix_caching",),
    ),
    Rule(
        "mamba_cache_mode",
        "<0.33",
        caching.mamba_mode_flag,
        "model with mamba layers (hybrid or attention-free): prefix caching on means 'align', "
        "off means 'none'; a node that derives the other mode gets a different KV cache spec "
        "and the engine dies at start-up",
        "vllm/model_executor/models/config.py (MambaModelConfig.verify_and_update_config)",
        owns=("mamba_cache_mode",),
        when=caching.mamba_or_unknown,
    ),
    Rule(
        "mamba_cache_mode",
        ">=0.33",
        caching.mamba_mode_implied,
        "implied by prefix caching (--mamba-cache-mode is a deprecated no-op from 0.33); "
        "shown so the plan says what each node will run",
        "vllm/model_executor/models/config.py (MambaModelConfig.verify_and_update_config)",
        owns=("mamba_cache_mode",),
        when=caching.mamba_or_unknown,
    ),
    Rule(
        "enable_chunked_prefill",
        "",
        caching.chunked_prefill,
        "left unset, each node would derive it from its model config (is_chunked_prefill_supported: "
        "on but for encoder-decoder models); align mode requires it",
        "vllm/engine/arg_utils.py (EngineArgs._set_default_chunked_prefill_and_prefix_caching_args); "
        "vllm/config/model.py (ModelConfig.is_chunked_prefill_supported)",
        owns=("enable_chunked_prefill",),
    ),
    Rule(
        "mamba_block_size",
        "",
        caching.mamba_block_size,
        "model with mamba layers: only meaningful with prefix caching (align mode)",
        "vllm/config/vllm.py (VllmConfig.validate_mamba_block_size)",
        owns=("mamba_block_size",),
        when=lambda i: i.explicit("mamba_block_size") is not None and i.facts.mamba is not False,
    ),
    Rule(
        "num_speculative_tokens",
        "",
        speculative.speculative,
        "speculative decoding: the number of tokens changes the mamba state shapes; written "
        "out (vLLM refuses a config without it unless it names a draft model with n_predict)",
        "vllm/config/speculative.py (SpeculativeConfig.num_speculative_tokens)",
        owns=("speculative_config",),
        when=lambda i: i.explicit("speculative_config") is not None,
    ),
    Rule(
        "gpu_memory_utilization",
        "",
        memory_split.utilization,
        "left unset, each node claims its release's default fraction of its own memory (0.92 up to "
        "0.33; from 0.34 1.0 with the extensible KV cache, else 0.92), with nothing kept for the OS, "
        "the page cache (unified memory) or another deployment on the node: written out, the same on "
        "every node",
        "vllm/config/cache.py (CacheConfig.gpu_memory_utilization, resolved_gpu_memory_utilization); "
        "vllm/v1/worker/utils.py (request_memory)",
        owns=("gpu_memory_utilization",),
        source="launcher",
    ),
    Rule(
        "kv_cache_memory_bytes",
        "",
        memory_split.kv_cache_bytes,
        "the KV cache in bytes, the same on every rank: vLLM sizes no cache by itself (and from 0.34 "
        "turns the extensible KV cache off), so nodes of different memory claim the same",
        "vllm/v1/worker/gpu_worker.py (Worker.determine_available_memory); "
        "vllm/v1/core/kv_cache_planning.py (get_kv_cache_configs: every rank gets the smallest "
        "rank's blocks); vllm/config/vllm.py (VllmConfig._resolve_extensible_kv_cache)",
        owns=("kv_cache_memory_bytes",),
        source="launcher",
        when=memory_split.absolute,
    ),
)
