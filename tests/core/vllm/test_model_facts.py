"""The model's kind, from its config.json looked up in the release's catalog, and the override."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launcher.catalogs import load_catalog
from launcher.core.plan import Plan
from launcher.core.vllm.models import facts_from_config
from launcher.errors import SpecError
from launcher.load import plan_file
from tests.conftest import base_spec, edit, write

QWEN3_NEXT = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "layer_types": ["linear_attention", "full_attention"],
    "num_nextn_predict_layers": 1,
}
MAMBA2 = {"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2"}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
BERT = {"architectures": ["BertModel"], "model_type": "bert"}
DEEPSEEK_V2 = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "kv_lora_rank": 16}
# granite-4.0-micro: a hybrid architecture whose layers are all attention.
GRANITE_MICRO = {
    "architectures": ["GraniteMoeHybridForCausalLM"],
    "model_type": "granitemoehybrid",
    "layer_types": ["attention", "attention"],
}


def plan_with(tmp_path: Path, config: dict[str, Any] | None, version: str = "0.32.0", **changes: Any) -> Plan:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    if config is not None:
        (model / "config.json").write_text(json.dumps(config))
    spec = edit(base_spec(version), **{"model.path": str(model), "serve.enable_prefix_caching": None})
    return plan_file(write(tmp_path, edit(spec, **changes)))[1]


def rows(plan: Plan) -> dict[str, Any]:
    return {d.setting: d.value for d in plan.derived}


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (QWEN3_NEXT, {"is_hybrid": True, "enable_prefix_caching": True, "mamba_cache_mode": "align"}),
        (MAMBA2, {"is_attention_free": True, "enable_prefix_caching": False, "mamba_cache_mode": "none"}),
        (LLAMA, {"is_hybrid": False, "enable_prefix_caching": True, "enable_chunked_prefill": True}),
        (GRANITE_MICRO, {"is_hybrid": False, "enable_prefix_caching": True}),
    ],
    ids=["hybrid", "attention-free", "dense", "hybrid-arch-without-mamba-layers"],
)
def test_unset_settings_get_the_releases_own_default_for_the_architecture(
    tmp_path: Path, version: str, config: dict[str, Any], expected: dict[str, Any]
) -> None:
    plan = plan_with(tmp_path, config, version)
    assert expected.items() <= rows(plan).items()
    assert ("mamba_cache_mode" in rows(plan)) == ("mamba_cache_mode" in expected)
    pin = f"--mamba-cache-mode={expected.get('mamba_cache_mode')}"
    assert (pin in plan.nodes[0].argv) == (version == "0.32.0" and "mamba_cache_mode" in expected)


def test_an_mla_model_needs_both_settings_written_out_because_the_device_decides(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        plan_with(tmp_path, DEEPSEEK_V2)
    assert {p.dotted for p in caught.value.problems} == {
        "serve.enable_prefix_caching",
        "serve.enable_chunked_prefill",
    }
    assert all(p.message == "must be set explicitly for an MLA model" for p in caught.value.problems)
    assert all("depends on the device" in (p.hint or "") for p in caught.value.problems)
    settings = {"serve.enable_prefix_caching": True, "serve.enable_chunked_prefill": True}
    assert rows(plan_with(tmp_path, DEEPSEEK_V2, **settings))["use_mla"] is True


def test_the_model_row_names_kind_architecture_and_mtp_layers(tmp_path: Path) -> None:
    assert rows(plan_with(tmp_path, QWEN3_NEXT))["model"] == "hybrid (Qwen3NextForCausalLM), 1 MTP layer(s)"


@pytest.mark.parametrize("files", [{"config.json": BERT}, {"config.json": LLAMA, "modules.json": []}])
def test_a_pooling_model_needs_prefix_caching_written_out(tmp_path: Path, files: dict[str, Any]) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name, content in files.items():
        (model / name).write_text(json.dumps(content))
    spec = edit(base_spec(), **{"model.path": str(model), "serve.enable_prefix_caching": None})
    with pytest.raises(SpecError) as caught:
        plan_file(write(tmp_path, spec))
    (problem,) = [p for p in caught.value.problems if p.dotted == "serve.enable_prefix_caching"]
    assert problem.message == "must be set explicitly for a pooling model"


def test_an_architecture_vllm_does_not_know_leaves_the_kind_unknown_and_says_so(tmp_path: Path) -> None:
    config = {"architectures": ["NoSuchModelForCausalLM"], "model_type": "nosuch"}
    with pytest.raises(SpecError) as caught:
        plan_with(tmp_path, config)
    assert "depends on the model's kind, which the plan cannot tell" in caught.value.render()
    plan = plan_with(
        tmp_path,
        config,
        **{"serve.enable_prefix_caching": True, "serve.enable_chunked_prefill": True},
    )
    assert any(
        "NoSuchModelForCausalLM" in n and "not in vLLM 0.32.0's model registry" in n for n in plan.notes
    )


def test_model_hybrid_fills_in_an_unreadable_config(tmp_path: Path) -> None:
    plan = plan_with(tmp_path, None, **{"model.hybrid": True})
    assert rows(plan)["mamba_cache_mode"] == "align"
    assert "--mamba-cache-mode=align" in plan.nodes[0].argv


@pytest.mark.parametrize(("config", "declared"), [(QWEN3_NEXT, False), (LLAMA, True), (GRANITE_MICRO, True)])
def test_model_hybrid_contradicting_vllms_registry_is_a_located_error(
    tmp_path: Path, config: dict[str, Any], declared: bool
) -> None:
    with pytest.raises(SpecError) as caught:
        plan_with(tmp_path, config, **{"model.hybrid": declared})
    (problem,) = [p for p in caught.value.problems if p.dotted == "model.hybrid"]
    assert (
        f"is {str(declared).lower()}, but vLLM 0.32.0 builds {config['architectures'][0]}" in problem.message
    )
    assert problem.hint == "remove model.hybrid: the plan reads the architecture from config.json"
    assert ":" in caught.value.render().split("model.hybrid")[0]  # file:line before the key


def test_model_hybrid_agreeing_with_the_registry_is_accepted(tmp_path: Path) -> None:
    assert rows(plan_with(tmp_path, QWEN3_NEXT, **{"model.hybrid": True}))["is_hybrid"] is True


def test_encoder_decoder_models_default_both_settings_off(tmp_path: Path) -> None:
    config = {**LLAMA, "is_encoder_decoder": True}
    assert facts_from_config(config, "c", load_catalog("0.33.0")).kind == "encoder-decoder"
    plan = plan_with(tmp_path, config, "0.33.0")
    assert (rows(plan)["enable_prefix_caching"], rows(plan)["enable_chunked_prefill"]) == (False, False)


def test_model_hybrid_gives_the_kind_of_an_architecture_vllm_does_not_know(tmp_path: Path) -> None:
    config = {"architectures": ["NoSuchModelForCausalLM"], "model_type": "nosuch"}
    plan = plan_with(tmp_path, config, **{"model.hybrid": True})
    assert rows(plan)["model"] == "hybrid (NoSuchModelForCausalLM)"
    assert "--mamba-cache-mode=align" in plan.nodes[0].argv
    assert any("takes model.hybrid for the model's kind" in n for n in plan.notes)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("decoder", {"enable_prefix_caching": True, "enable_chunked_prefill": True}),
        (
            "hybrid",
            {"enable_prefix_caching": True, "enable_chunked_prefill": True, "mamba_cache_mode": "align"},
        ),
        ("attention-free", {"enable_prefix_caching": False, "mamba_cache_mode": "none"}),
        ("encoder-decoder", {"enable_prefix_caching": False, "enable_chunked_prefill": False}),
    ],
)
def test_model_kind_settles_what_an_unreadable_config_leaves_open(
    tmp_path: Path, kind: str, expected: dict[str, Any]
) -> None:
    plan = plan_with(tmp_path, None, **{"serve.enable_chunked_prefill": None, "model.kind": kind})
    assert expected.items() <= rows(plan).items()
    assert ("mamba_cache_mode" in rows(plan)) == ("mamba_cache_mode" in expected)
    assert rows(plan)["model"].startswith(kind)
    row = next(d for d in plan.derived if d.setting == "model")
    assert row.reason.startswith("model.kind in the spec") and row.source == "spec"


def test_model_kind_pooling_still_needs_prefix_caching_written_out(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        plan_with(tmp_path, None, **{"model.kind": "pooling"})
    (problem,) = [p for p in caught.value.problems if p.dotted == "serve.enable_prefix_caching"]
    assert problem.message == "must be set explicitly for a pooling model"


@pytest.mark.parametrize(
    ("config", "declared", "real"),
    [(QWEN3_NEXT, "decoder", "hybrid"), (LLAMA, "hybrid", "decoder"), (MAMBA2, "hybrid", "attention-free")],
)
def test_model_kind_contradicting_vllms_registry_is_a_located_error(
    tmp_path: Path, config: dict[str, Any], declared: str, real: str
) -> None:
    with pytest.raises(SpecError) as caught:
        plan_with(tmp_path, config, **{"model.kind": declared})
    (problem,) = [p for p in caught.value.problems if p.dotted == "model.kind"]
    assert problem.message.startswith(
        f"is {declared}, but vLLM 0.32.0 builds {config['architectures'][0]} as {real}"
    )
    assert f"write model.kind: {real}" in (problem.hint or "")


def test_model_kind_agreeing_with_the_registry_is_accepted(tmp_path: Path) -> None:
    plan = plan_with(tmp_path, QWEN3_NEXT, **{"model.kind": "hybrid"})
    assert rows(plan)["is_hybrid"] is True
