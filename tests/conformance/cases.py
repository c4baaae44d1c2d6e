"""What the conformance tier runs through each real vLLM release, as data.

PLANS are specs the launcher accepts, one or more per model kind: each node's command must
resolve in vLLM to what the plan says, and what the plan pinned while the spec left it
unset must be what vLLM chooses when the pin is left out. REFUSALS are specs the launcher
refuses: each carries the commands that show vLLM really does what the message says
(refuses, or changes the value), and that the hint's fix really holds.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from launcher.catalogs import load_catalog
from launcher.core.plan import Plan, build_plan
from launcher.core.rules.base import bool_args, in_range
from launcher.core.spec.versions import parse
from launcher.core.vllm.catalog import Catalog
from launcher.load import catalog_for, read_model_facts
from tests.conftest import ROOT, spec_of

# The one-model examples (each deployment of the others is planned as one of these, or as
# the one-node case below).
EXAMPLES = sorted(
    p for p in (ROOT / "configs").glob("*.yaml") if "deployments" not in yaml.safe_load(p.read_text())
)
# The settings the plan pins from the model's kind when the spec leaves them unset.
DEFAULTED = ("enable_prefix_caching", "enable_chunked_prefill", "mamba_cache_mode")
# The settings the plan pins from the nodes' memory when the spec leaves them unset: left out
# of the unpinned command too (vLLM's own default shows there, for `make release` to compare).
MEMORY = ("gpu_memory_utilization", "kv_cache_memory_bytes")
HOSTILE_NAME = 'it\'s "quoted" $(not run) `x` ; & | *'
HOSTILE_TEMPLATE = "--not-a-flag {{ messages }}\n'; rm -rf /"
MTP = {"method": "mtp", "num_speculative_tokens": 2}
ON = {"enable_prefix_caching": True}
OFF = {"enable_prefix_caching": False}
BOTH_OFF = {"enable_prefix_caching": False, "enable_chunked_prefill": False}


@dataclass(frozen=True)
class Case:
    """A spec the launcher accepts: a model kind and `serve` keys (or a shipped example)."""

    id: str
    kind: str
    serve: dict[str, Any] = field(default_factory=dict)
    example: str | None = None
    served_name: str | None = None
    nodes: int = 2  # one: a deployment on one node, a plain `vllm serve`
    env: dict[str, str] = field(default_factory=dict)
    own_release: bool = False  # a shipped example: planned on the release it names, as a user would


@dataclass(frozen=True)
class Check:
    """One command through the real vLLM: an accepted spec's command, changed, and the outcome."""

    kind: str
    serve: dict[str, Any]  # an accepted spec; its rank-1 command is the start
    raw: dict[str, Any] = field(default_factory=dict)  # appended as given, past the launcher
    strip: tuple[str, ...] = ()  # pinned options taken out, left to vLLM
    resolved: dict[str, Any] = field(default_factory=dict)  # what vLLM must derive
    error: str | None = None  # or: words of vLLM's refusal
    env: dict[str, str] = field(default_factory=dict)  # the engine variables it runs under


@dataclass(frozen=True)
class Refusal:
    """A spec the launcher refuses, the words of its message, and vLLM's own behaviour."""

    id: str
    kind: str
    serve: dict[str, Any]
    path: str
    words: str
    checks: tuple[Check, ...]
    hint: str | None = None
    releases: str = ""
    env: dict[str, str] = field(default_factory=dict)


PLANS: tuple[Case, ...] = (
    Case("hybrid", "hybrid"),
    Case("hybrid-prefix-caching-off", "hybrid", OFF),
    Case("hybrid-mtp", "hybrid", {"speculative_config": MTP}),
    Case("hybrid-mode-written", "hybrid", {**ON, "mamba_cache_mode": "align"}),
    Case("dense", "dense"),
    Case("dense-one-node", "dense", {"tensor_parallel_size": 1}, nodes=1),
    Case("dense-prefix-caching-off", "dense", OFF),
    Case("dense-chunked-prefill-off", "dense", {"enable_chunked_prefill": False}),
    Case("dense-kv-cache-in-bytes", "dense", {"kv_cache_memory_bytes": "1G"}),
    Case("dense-pipeline", "dense", {"tensor_parallel_size": 1, "pipeline_parallel_size": 2}),
    Case("moe", "moe"),
    Case("moe-prefix-caching-off", "moe", OFF),
    Case("hybrid-pipeline", "hybrid", {"tensor_parallel_size": 1, "pipeline_parallel_size": 2}),
    Case("attention-free", "attention-free"),
    Case("attention-free-prefix-caching-on", "attention-free", ON),
    Case("mla", "mla", {**BOTH_OFF, "attention_backend": "CPU_MLA"}),
    Case("pooling", "pooling", BOTH_OFF),
    Case("pooling-causal", "dense", {"runner": "pooling", **ON, "enable_chunked_prefill": True}),
    *(Case(f"example-{p.stem}", "hybrid", example=p.stem, own_release=True) for p in EXAMPLES),
    Case(
        "hostile",
        "hybrid",
        {"chat_template": HOSTILE_TEMPLATE},
        example="qwen3-next-2x-spark",
        served_name=HOSTILE_NAME,
    ),
)

# The cases that leave a defaulted setting to the plan (the others write every one out).
DEFAULT_CASES = tuple(
    c
    for c in PLANS
    if not c.example and not {"enable_prefix_caching", "enable_chunked_prefill"} <= c.serve.keys()
)

REFUSALS: tuple[Refusal, ...] = (
    *(
        Refusal(
            f"mamba-mode-{mode}-with-prefix-caching-{pc}{suffix}",
            "hybrid",
            {"enable_prefix_caching": pc == "on", "mamba_cache_mode": mode},
            "serve.mamba_cache_mode",
            words,
            (
                Check(
                    "hybrid", {"enable_prefix_caching": pc == "on"}, {"mamba_cache_mode": mode}, resolved=now
                ),
                Check(
                    "hybrid", {"enable_prefix_caching": pc != "on"}, {"mamba_cache_mode": mode}, resolved=kept
                ),
            ),
            hint=f"set enable_prefix_caching: {str(pc != 'on').lower()}",
            releases=releases,
        )
        for mode, pc, now, kept in (
            ("none", "on", {"mamba_cache_mode": "align"}, {"mamba_cache_mode": "none"}),
            ("align", "off", {"mamba_cache_mode": "none"}, {"mamba_cache_mode": "align"}),
        )
        for suffix, releases, words in (
            ("", "<0.33", f"vLLM turns it into {'align' if mode == 'none' else 'none'!r}"),
            ("-033", ">=0.33", f"so it is {'align' if mode == 'none' else 'none'!r}"),
        )
    ),
    Refusal(
        "mamba-mode-not-a-choice",
        "hybrid",
        {"mamba_cache_mode": "all"},
        "serve.mamba_cache_mode",
        "'all' does not exist in vLLM",
        (Check("hybrid", {}, {"mamba_cache_mode": "all"}, error="parser rejected"),),
        releases="<0.33",
    ),
    *(
        Refusal(
            f"chunked-prefill-off-{kind}-prefix-caching",
            kind,
            {**ON, "enable_chunked_prefill": False},
            "serve.enable_chunked_prefill",
            "with prefix caching needs chunked prefill",
            (
                Check(kind, ON, {"enable_chunked_prefill": False}, error="Chunked prefill is required"),
                Check(
                    kind, OFF, {"enable_chunked_prefill": False}, resolved={"enable_chunked_prefill": False}
                ),
            ),
            hint="turn prefix caching off",
        )
        for kind in ("hybrid", "attention-free")
    ),
    Refusal(  # the range is the release's own (CacheConfig: gt=0, le=1), read into its catalog
        "gpu-memory-utilization-as-a-percentage",
        "hybrid",
        {"gpu_memory_utilization": 85},
        "serve.gpu_memory_utilization",
        "85 is outside (0, 1]",
        (
            Check("hybrid", {}, {"gpu_memory_utilization": 85}, error="less than or equal to 1"),
            Check("hybrid", {}, {"gpu_memory_utilization": 0.85}),
        ),
        hint="0.85 for 85%",
    ),
    Refusal(
        "mamba-block-size-without-prefix-caching",
        "hybrid",
        {**OFF, "mamba_block_size": 64},
        "serve.mamba_block_size",
        "vLLM refuses --mamba-block-size without prefix caching",
        (
            Check(
                "hybrid", OFF, {"mamba_block_size": 64}, error="can only be set with --enable-prefix-caching"
            ),
            Check("hybrid", ON, {"mamba_block_size": 64}, resolved={"mamba_block_size": 64}),
        ),
    ),
    Refusal(
        "mtp-without-num-speculative-tokens",
        "hybrid",
        {"speculative_config": {"method": "mtp"}},
        "serve.speculative_config",
        "needs an explicit num_speculative_tokens",
        (
            Check(
                "hybrid",
                {},
                {"speculative_config": {"method": "mtp"}},
                error="num_speculative_tokens must be provided with speculative model unless the draft "
                "model config contains an n_predict parameter",
            ),
        ),
        hint="refuses the config unless it names a draft model whose config has n_predict",
    ),
    Refusal(
        "unknown-speculative-method",
        "hybrid",
        {"speculative_config": {"method": "mtpp", "num_speculative_tokens": 1}},
        "serve.speculative_config",
        "'mtpp' is not a speculative method of vLLM",
        (
            Check(
                "hybrid",
                {},
                {"speculative_config": {"method": "mtpp", "num_speculative_tokens": 1}},
                error="mtpp",
            ),
        ),
    ),
    *(
        Refusal(
            f"pooling-{key}-unset",
            "dense",
            {
                "runner": "pooling",
                **{k: True for k in ("enable_prefix_caching", "enable_chunked_prefill") if k != key},
            },
            f"serve.{key}",
            "must be set explicitly for a pooling model",
            (
                Check(
                    "dense",
                    {"runner": "pooling", **ON, "enable_chunked_prefill": True},
                    strip=(key,),
                    resolved={key: True},
                ),
                Check(
                    "dense",
                    {"runner": "pooling", **ON, "enable_chunked_prefill": True},
                    {"pooler_config": {"seq_pooling_type": "MEAN"}},
                    strip=(key,),
                    resolved={key: False},
                ),
            ),
            hint="depends on its pooler",
        )
        for key in ("enable_prefix_caching", "enable_chunked_prefill")
    ),
    Refusal(
        "mla-prefix-caching-unset",
        "mla",
        {"enable_chunked_prefill": False},
        "serve.enable_prefix_caching",
        "must be set explicitly for an MLA model",
        (
            # This machine's CPU platform turns an explicit `on` off; a GPU would keep it.
            Check(
                "mla",
                {**BOTH_OFF, "attention_backend": "CPU_MLA"},
                {"enable_prefix_caching": True, "enable_chunked_prefill": True},
                resolved={"enable_prefix_caching": False, "enable_chunked_prefill": False, "use_mla": True},
            ),
            Check("dense", ON, {"enable_chunked_prefill": True}, resolved={"enable_prefix_caching": True}),
        ),
        hint="depends on the device",
    ),
    Refusal(
        "unreadable-model-prefix-caching-unset",
        "unreadable",
        {"enable_chunked_prefill": True},
        "serve.enable_prefix_caching",
        "depends on the model's kind, which the plan cannot tell",
        (
            Check("dense", ON, strip=("enable_prefix_caching",), resolved={"enable_prefix_caching": True}),
            Check(
                "attention-free",
                OFF,
                strip=("enable_prefix_caching",),
                resolved={"enable_prefix_caching": False},
            ),
        ),
        hint="model.kind: decoder | hybrid | attention-free | pooling | encoder-decoder",
    ),
    Refusal(
        "model-kind-contradicts-the-registry",
        "hybrid",
        {"model_kind": "decoder"},
        "model.kind",
        "is decoder, but vLLM",
        (Check("hybrid", {}, resolved={"is_hybrid": True}),),
        hint="write model.kind: hybrid",
    ),
    Refusal(
        "model-hybrid-contradicts-the-registry",
        "hybrid",
        {"model_hybrid": False},
        "model.hybrid",
        "but vLLM",
        (Check("hybrid", {}, resolved={"is_hybrid": True}),),
        hint="remove model.hybrid",
    ),
    Refusal(
        "v2-model-runner-variable",
        "dense",
        {},
        "env.VLLM_USE_V2_MODEL_RUNNER",
        "refuses VLLM_USE_V2_MODEL_RUNNER=0: Model Runner V1 has been removed",
        (
            Check("dense", {}, env={"VLLM_USE_V2_MODEL_RUNNER": "0"}, error="is no longer supported"),
            Check("dense", {}, resolved={"runner_type": "generate"}),
        ),
        hint="remove VLLM_USE_V2_MODEL_RUNNER from env",
        releases=">=0.34",
        env={"VLLM_USE_V2_MODEL_RUNNER": "0"},
    ),
    Refusal(
        "speculative-key-removed",
        "hybrid",
        {"speculative_config": {**MTP, "disable_padded_drafter_batch": False}},
        "serve.speculative_config.disable_padded_drafter_batch",
        "is no longer a key of --speculative-config",
        (
            Check(
                "hybrid",
                {},
                {"speculative_config": {**MTP, "disable_padded_drafter_batch": False}},
                error="disable_padded_drafter_batch",
            ),
            Check("hybrid", {"speculative_config": MTP}, resolved={"num_speculative_tokens": 2}),
        ),
        hint="remove disable_padded_drafter_batch",
        releases=">=0.34",
    ),
)


def applies(refusal: Refusal, version: str) -> bool:
    """True when the refusal is in force for `version`."""
    return in_range(parse(version), refusal.releases)


def planned_on(case: Case, version: str) -> bool:
    """True when the case is planned on `version`: every release, but a shipped example only on
    the release it names (dense-2x-spark's VLLM_USE_V2_MODEL_RUNNER, say, is 0.33's alone)."""
    if not case.own_release or case.example is None:
        return True
    data = yaml.safe_load((ROOT / "configs" / f"{case.example}.yaml").read_text())
    return str(data["vllm"]["version"]) == version


def unset_defaults(case: Case, data: dict[str, Any], plan: Plan) -> tuple[str, ...]:
    """The settings the plan decided because the spec left them unset: from the model's kind
    (DEFAULTED), and the memory split."""
    rows = {d.setting for d in plan.derived}
    return tuple(k for k in (*DEFAULTED, *MEMORY) if k not in data["serve"] and k in rows)


def catalog_of(data: dict[str, Any]) -> Catalog:
    """The catalog a spec's release uses."""
    return catalog_for(spec_of(data))


def hand_split(plan: Plan, version: str) -> tuple[list[str], list[str]]:
    """The field report's split: prefix caching pinned on the head only, mamba mode left to vLLM."""
    catalog = load_catalog(version)
    head = strip(plan.nodes[0].argv[2:], catalog, ("mamba_cache_mode",))
    worker = strip(plan.nodes[1].argv[2:], catalog, ("mamba_cache_mode", "enable_prefix_caching"))
    return head, [*worker, *bool_args(catalog.options["enable_prefix_caching"], False)]


def spec_data(case: Case, version: str, venv: Path, models: dict[str, Path]) -> dict[str, Any]:
    """The spec of a case, on this machine's venv and tiny models."""
    if case.example:
        data = yaml.safe_load((ROOT / "configs" / f"{case.example}.yaml").read_text())
    else:
        data = {
            "name": "conformance",
            "nodes": NODES[: case.nodes],
            "model": {},
            "serve": {"tensor_parallel_size": 2},
        }
    data = copy.deepcopy(data)
    data.pop("export", None)  # how the file is handed to Kubernetes: not a deployment's spec
    data["vllm"] = {"version": version, "runtime": "venv", "venv": str(venv)}
    data["model"] = {**data["model"], "path": str(models[case.kind])}
    if case.served_name:
        data["model"]["served_name"] = case.served_name
    serve = {k: v for k, v in data["serve"].items() if k not in ("gpu_memory_utilization", "kv_cache_dtype")}
    extra = dict(case.serve)
    if "model_hybrid" in extra:
        data["model"]["hybrid"] = extra.pop("model_hybrid")
    if "model_kind" in extra:
        data["model"]["kind"] = extra.pop("model_kind")
    data["serve"] = {**serve, "max_model_len": 512, "enforce_eager": True, **extra}
    if case.env:
        data["env"] = {**data.get("env", {}), **case.env}
    return data


NODES = [{"name": f"n{i}", "ssh": f"n{i}", "address": f"10.0.0.{i}", "interface": "eth0"} for i in (1, 2)]


def plan_data(data: dict[str, Any]) -> Plan:
    """Plan spec data the way `plan` does: config.json read and looked up in the catalog."""
    spec = spec_of(data)
    catalog = catalog_for(spec)
    return build_plan(spec, read_model_facts(spec, catalog), catalog)


def check_argv(check: Check, version: str, venv: Path, models: dict[str, Path]) -> list[str]:
    """The command a Check sends to vLLM: an accepted plan's rank-1 command, changed."""
    plan = plan_data(spec_data(Case("check", check.kind, check.serve), version, venv, models))
    catalog = catalog_for(spec_of(spec_data(Case("check", check.kind, {}), version, venv, models)))
    return [*strip(plan.nodes[1].argv[2:], catalog, check.strip), *raw_args(catalog, check.raw)]


def strip(argv: tuple[str, ...], catalog: Catalog, keys: tuple[str, ...]) -> list[str]:
    """argv without every form of the options `keys`."""
    forms = {f for k in keys for f in (*catalog.options[k].flags, *catalog.options[k].negative)}
    return [a for a in argv if a.split("=")[0] not in forms]


def raw_args(catalog: Catalog, raw: dict[str, Any]) -> list[str]:
    """Options written as given, in the release's own forms (past the launcher's checks)."""
    out: list[str] = []
    for key, value in raw.items():
        option = catalog.options[key]
        if isinstance(value, bool):
            out += bool_args(option, value)
        else:
            text = json.dumps(value, separators=(",", ":")) if isinstance(value, dict) else str(value)
            out.append(f"{option.flag}={text}")
    return out
