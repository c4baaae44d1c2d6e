"""The plan's rows that no rule decides: the model's traits, the topology, the container. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.core.spec.container import container_settings
from launcher.core.spec.sections import Spec
from launcher.core.vllm.catalog import Catalog
from launcher.core.vllm.models import ModelFacts

# Where a decided value comes from: the spec's own value, the launcher's decision, the value
# vLLM would choose by itself (pinned so every node agrees), or the model's files.
SOURCES = ("spec", "launcher", "vllm-default", "model")


@dataclass(frozen=True, slots=True)
class Derived:
    """One decided setting, for the plan's table."""

    setting: str
    value: Any
    flag: str | None  # the argv pinning it; None when implied by others
    reason: str
    source: str  # where the value comes from: one of SOURCES
    note: str | None = None


def runner_set(spec: Spec) -> bool:
    """True when the spec names the runner (or a conversion) itself."""
    return spec.serve.get("runner", "auto") != "auto" or spec.serve.get("convert", "auto") not in (
        "auto",
        "none",
    )


def model_rows(
    facts: ModelFacts, runner: str | None, catalog: Catalog, runner_set: bool = False
) -> list[Derived]:
    """What the plan knows of the model; each known trait is a row the nodes' vLLM must confirm."""
    registry = f"vLLM {catalog.version}'s model registry"
    declared = facts.source.startswith(("model.kind in the spec", "model.hybrid in the spec"))
    whence = f"{facts.source}, looked up in {registry}" if facts.kind and not declared else facts.source
    source = "spec" if declared else "model"
    rows = [Derived("model", facts.text, None, whence, source)]
    traits = (
        ("is_hybrid", facts.hybrid, "mamba or linear-attention layers mixed with attention (IsHybrid)"),
        ("is_attention_free", facts.attention_free, "no attention layer at all (IsAttentionFree)"),
        ("use_mla", facts.mla, "multi-head latent attention: the model type and kv_lora_rank"),
    )
    for setting, value, why in traits:
        if value is not None:
            rows.append(Derived(setting, value, None, f"{why} [{registry}; vllm/config/model.py]", source))
    if runner is not None:
        why = "serve.runner / serve.convert, else the architecture (ModelConfig._get_runner_type)"
        rows.append(Derived("runner_type", runner, None, why, "spec" if runner_set else source))
    return rows


def topology_rows(spec: Spec) -> list[Derived]:
    """The rows of the multi-node topology (and the container, for the docker runtime)."""
    n = len(spec.nodes)
    env = "VLLM_HOST_IP, GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME" + (
        ", NCCL_IB_HCA" if any(x.hca for x in spec.nodes) else ""
    )
    return [
        *(_ranks(n) if n > 1 else []),  # one node: a plain `vllm serve`, no ranks
        Derived(
            "per-node env",
            env,
            None,
            "from each node's address, interface and hca; every other variable is identical",
            "launcher",
        ),
        *_container(spec),
    ]


def _ranks(n: int) -> list[Derived]:
    return [
        Derived(
            "node_rank",
            f"0..{n - 1}",
            "--node-rank=R",
            "the node's position in the spec; the only flag besides --headless that differs",
            "launcher",
        ),
        Derived("headless", "ranks 1..", "--headless", "only rank 0 serves the API", "launcher"),
    ]


def _container(spec: Spec) -> list[Derived]:
    if spec.vllm.runtime != "docker":
        return []
    return [Derived(*row) for row in container_settings(spec.vllm.container)]
