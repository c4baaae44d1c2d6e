"""Rows of the resolve probe: what each node's own vLLM derives from its exact command. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from launcher.core.checks.check_report import Row, same
from launcher.core.plan import Plan
from launcher.core.rules.base import in_range
from launcher.core.spec.versions import parse
from launcher.core.vllm.catalog import Catalog

# Settings the probe brings back that must agree on every node, and the flag pinning each.
AGREE = {
    "enable_prefix_caching": "--enable-prefix-caching",
    "mamba_cache_mode": "--mamba-cache-mode",
    "mamba_block_size": "--mamba-block-size",
    "block_size": "--block-size",
    "cache_dtype": "--kv-cache-dtype",
    "mamba_cache_dtype": "--mamba-cache-dtype",
    "mamba_ssm_cache_dtype": "--mamba-ssm-cache-dtype",
    "enable_chunked_prefill": "--enable-chunked-prefill",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "async_scheduling": "--async-scheduling",
    "num_speculative_tokens": "--speculative-config",
    "dtype": "--dtype",
    "max_model_len": "--max-model-len",
    "enforce_eager": "--enforce-eager",
    "compilation_mode": "--compilation-config",
    "cudagraph_mode": "--compilation-config",
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "nnodes": "--nnodes",
    "master_addr": "--master-addr",
    "master_port": "--master-port",
    "distributed_executor_backend": "--distributed-executor-backend",
    "is_hybrid": "model.path",
    "is_attention_free": "model.path",
    "use_mla": "model.path",
    "runner_type": "--runner",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "enable_extensible_kv_cache": "--enable-extensible-kv-cache",
    "use_breakable_cudagraph": "VLLM_USE_BREAKABLE_CUDAGRAPH",
}
# Settings that a release before this one does not have (no field to read): their row is left
# out for such a release, and a node of a later one that cannot report them fails the row.
SINCE = {"enable_extensible_kv_cache": "0.34", "use_breakable_cudagraph": "0.34"}


def probe_rows(plan: Plan, catalog: Catalog, resolved: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """What each node's own vLLM derives from its own argv and env: equal, and as planned."""
    rows = []
    planned = planned_values(plan)
    errors = {n: r["error"] for n, r in resolved.items() if "error" in r}
    if errors:
        return [
            Row(
                "probe",
                "vLLM resolves the command",
                errors,
                False,
                "this node's vLLM rejects the planned command: see the error",
            )
        ]
    for key, flag in AGREE.items():
        if not has_setting(plan.vllm_version, key):
            continue
        values = {n: r.get(key) for n, r in resolved.items()}
        lacking = sorted(n for n, r in resolved.items() if key not in r or _lacks(r, key))
        if lacking:
            hint = (
                f"the probe cannot read {key} from the vLLM on {', '.join(lacking)}: the probe and "
                "that release are out of step, so whether the nodes agree is unknown"
            )
            shown = {n: "(not reported)" if n in lacking else v for n, v in values.items()}
            rows.append(Row("probe", key, shown, False, hint))
            continue
        pin = flag if flag.startswith("--") else f"the same {flag}"
        if key == "mamba_cache_mode" and not catalog.is_live("mamba_cache_mode"):
            pin = "--enable-prefix-caching (the mode follows it)"
        hint = f"the nodes' vLLM derive different {key} (or not the planned one): pin it with {pin}"
        rows.append(same("probe", key, values, hint, expected=planned.get(key)))
    return rows + hash_rows(resolved)


def has_setting(version: str, key: str) -> bool:
    """True when vLLM `version` has the setting `key` (every release has it but those in SINCE)."""
    return key not in SINCE or in_range(parse(version), f">={SINCE[key]}")


def expected_missing(version: str) -> list[str]:
    """The settings a node of vLLM `version` rightly reports as missing (its release lacks them)."""
    return [k for k in SINCE if not has_setting(version, k)]


def planned_values(plan: Plan) -> dict[str, Any]:
    """What the plan holds each node's vLLM to, by the probe's key: every setting it decides for
    certain (a conditional one, like 'align if hybrid', cannot be held to)."""
    decided = {d.setting: d.value for d in plan.derived}
    return {k: _planned(decided[k]) for k in AGREE if _planned(decided.get(k)) is not None}


HASH_ITEM = "vllm config hash"
SHOWN_FIELDS = 8


def hash_rows(resolved: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """vLLM's own hash of each node's resolved config (model, cache, parallel, scheduler, device,
    load, attention, compilation ... configs) in one row, always there: where the hashes differ,
    the fields that do; where a node's vLLM cannot give one, why, and the row fails (a hash that
    cannot be compared is no agreement)."""
    hashes = {n: r.get("config_hash") for n, r in resolved.items()}
    if None in hashes.values():
        lacking = {n: _no_hash(r) for n, r in resolved.items() if r.get("config_hash") is None}
        shown = {n: h if h is not None else f"(none: {lacking[n]})" for n, h in hashes.items()}
        named = ", ".join(sorted(lacking))
        why = "; ".join(f"{n}: {w}" for n, w in lacking.items())
        hint = (
            f"the vLLM on {named} gives no config hash ({why}): whether the nodes resolve the same "
            "config is unknown; run the same vLLM build on every node (one the probe knows)"
        )
        return [Row("probe", HASH_ITEM, shown, False, hint)]
    if len(set(hashes.values())) == 1:
        return [Row("probe", HASH_ITEM, hashes, True)]
    fields = differing_fields({n: r.get("config_hash_parts") or {} for n, r in resolved.items()})
    named = ", ".join(fields[:SHOWN_FIELDS]) + (
        f" and {len(fields) - SHOWN_FIELDS} more" if len(fields) > SHOWN_FIELDS else ""
    )
    hint = (
        f"the nodes' vLLM resolve different configs: {named or 'the vLLM version'} differ; the same flags, "
        "VLLM_* variables, vLLM build and model files on every node make them agree"
    )
    return [Row("probe", HASH_ITEM, hashes, False, hint)]


def _no_hash(resolved: Mapping[str, Any]) -> str:
    """Why a node's probe brought no hash back (the probe says; an older probe says nothing)."""
    return str(resolved.get("config_hash_error") or "the probe reported none")


def differing_fields(parts: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """`part.field` for every field whose value differs between nodes, in the parts whose own
    hash differs (a field that differs by design leaves a part's hash alone)."""
    names = sorted({p for node in parts.values() for p in node})
    out = []
    for part in names:
        hashes = {json.dumps((node.get(part) or {}).get("hash")) for node in parts.values()}
        if len(hashes) == 1:
            continue
        fields = sorted({f for node in parts.values() for f in ((node.get(part) or {}).get("fields") or {})})
        for field in fields:
            values = {str(((node.get(part) or {}).get("fields") or {}).get(field)) for node in parts.values()}
            if len(values) > 1:
                out.append(f"{part}.{field}")
    return out


def _lacks(resolved: Mapping[str, Any], key: str) -> bool:
    """True when the probe said this vLLM has no field for `key` (see probe.resolve)."""
    return key in resolved.get("missing", ())


def _planned(value: Any) -> Any:
    """A planned value the probe can be held to (a conditional one, like 'align if hybrid', cannot)."""
    if isinstance(value, str) and " " in value:
        return None
    return value
