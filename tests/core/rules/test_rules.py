"""The derived settings: what the plan decides, per vLLM release and model kind."""

from __future__ import annotations

from typing import Any

import pytest

from launcher.core.plan import Plan, PlanProblems
from tests.conftest import base_spec, edit, plan_of


def derived(plan: Plan) -> dict[str, Any]:
    return {d.setting: d.value for d in plan.derived}


def argv(plan: Plan, rank: int = 0) -> tuple[str, ...]:
    return plan.nodes[rank].argv


@pytest.mark.parametrize(
    ("version", "flag"), [("0.32.0", "--no-enable-prefix-caching"), ("0.33.0", "--disable-prefix-caching")]
)
def test_prefix_caching_off_uses_the_negative_form_of_the_release(version: str, flag: str) -> None:
    plan = plan_of(edit(base_spec(version), **{"serve.enable_prefix_caching": False}))
    assert flag in argv(plan)
    assert derived(plan)["enable_prefix_caching"] is False


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_prefix_caching_unset_is_resolved_on_and_written_out(version: str) -> None:
    plan = plan_of(edit(base_spec(version), **{"serve.enable_prefix_caching": None}))
    assert "--enable-prefix-caching" in argv(plan)
    assert derived(plan)["enable_prefix_caching"] is True


def test_032_hybrid_pins_mamba_cache_mode_align_and_chunked_prefill() -> None:
    plan = plan_of(base_spec("0.32.0"))
    assert "--mamba-cache-mode=align" in argv(plan)
    assert "--enable-chunked-prefill" in argv(plan)
    assert derived(plan)["mamba_cache_mode"] == "align"


def test_032_hybrid_without_prefix_caching_pins_none() -> None:
    plan = plan_of(edit(base_spec("0.32.0"), **{"serve.enable_prefix_caching": False}))
    assert "--mamba-cache-mode=none" in argv(plan)


def test_033_emits_no_mamba_flag_but_shows_the_implied_mode() -> None:
    plan = plan_of(base_spec("0.33.0"))
    assert not any(a.startswith("--mamba-cache-mode") for a in argv(plan))
    row = next(d for d in plan.derived if d.setting == "mamba_cache_mode")
    assert (row.value, row.flag) == ("align", None)
    assert "--enable-prefix-caching" in argv(plan)


def test_033_agreeing_mamba_mode_is_dropped_with_a_note() -> None:
    plan = plan_of(edit(base_spec("0.33.0"), **{"serve.mamba_cache_mode": "align"}))
    assert not any(a.startswith("--mamba-cache-mode") for a in argv(plan))
    assert any("dropped" in n for n in plan.notes)


def test_033_contradicting_mamba_mode_is_an_error() -> None:
    with pytest.raises(PlanProblems) as caught:
        plan_of(edit(base_spec("0.33.0"), **{"serve.mamba_cache_mode": "none"}))
    assert "contradicts prefix caching" in caught.value.problems[0].message


def test_dense_model_gets_no_mamba_setting() -> None:
    plan = plan_of(base_spec("0.32.0"), "decoder")
    assert "mamba_cache_mode" not in derived(plan)
    assert not any("mamba" in a for a in argv(plan))


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_unknown_model_pins_no_mamba_mode_and_says_so(version: str) -> None:
    spec = edit(base_spec(version), **{"serve.enable_chunked_prefill": True})
    plan = plan_of(spec, None)
    assert derived(plan)["mamba_cache_mode"] == "align if the model has mamba layers"
    assert not any(a.startswith("--mamba-cache-mode") for a in argv(plan))


@pytest.mark.parametrize("key", ["enable_prefix_caching", "enable_chunked_prefill"])
def test_unknown_model_needs_the_settings_whose_default_depends_on_its_kind(key: str) -> None:
    spec = edit(base_spec(), **{"serve.enable_prefix_caching": True, "serve.enable_chunked_prefill": True})
    with pytest.raises(PlanProblems) as caught:
        plan_of(edit(spec, **{f"serve.{key}": None}), None)
    (problem,) = caught.value.problems
    assert problem.path == ("serve", key) and "depends on the model's kind" in problem.message
    assert "plan --from-head" in (problem.hint or "") and "model.kind: decoder | hybrid" in (
        problem.hint or ""
    )


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_attention_free_model_gets_vllms_own_default_off_and_the_mamba_rows(version: str) -> None:
    plan = plan_of(edit(base_spec(version), **{"serve.enable_prefix_caching": None}), "attention-free")
    assert derived(plan)["enable_prefix_caching"] is False
    assert derived(plan)["mamba_cache_mode"] == "none"
    assert derived(plan)["enable_chunked_prefill"] is True
    assert ("--mamba-cache-mode=none" in argv(plan)) == (version == "0.32.0")


def test_attention_free_model_with_prefix_caching_is_align() -> None:
    plan = plan_of(base_spec("0.32.0"), "attention-free")
    assert "--mamba-cache-mode=align" in argv(plan)


@pytest.mark.parametrize("key", ["enable_prefix_caching", "enable_chunked_prefill"])
def test_pooling_model_needs_both_settings_written_out(key: str) -> None:
    spec = edit(base_spec(), **{"serve.enable_prefix_caching": False, "serve.enable_chunked_prefill": False})
    with pytest.raises(PlanProblems) as caught:
        plan_of(edit(spec, **{f"serve.{key}": None}), "pooling")
    (problem,) = caught.value.problems
    assert problem.message == "must be set explicitly for a pooling model"
    assert "depends on its pooler" in (problem.hint or "")


@pytest.mark.parametrize(
    ("serve", "runner"),
    [({}, "generate"), ({"runner": "pooling"}, "pooling"), ({"convert": "embed"}, "pooling")],
)
def test_the_runner_comes_from_the_spec_else_the_model(serve: dict[str, Any], runner: str) -> None:
    spec = edit(base_spec("0.33.0"), **{"serve.enable_chunked_prefill": True})
    spec["serve"].update(serve)
    assert derived(plan_of(spec, "decoder"))["runner_type"] == runner


@pytest.mark.parametrize(
    ("pc", "mode", "hint"),
    [(True, "none", "enable_prefix_caching: false"), (False, "align", "enable_prefix_caching: true")],
)
@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_a_contradicting_mamba_mode_hints_at_the_prefix_caching_that_keeps_it(
    version: str, pc: bool, mode: str, hint: str
) -> None:
    spec = edit(base_spec(version), **{"serve.enable_prefix_caching": pc, "serve.mamba_cache_mode": mode})
    with pytest.raises(PlanProblems) as caught:
        plan_of(spec)
    assert caught.value.problems[0].hint == f"remove mamba_cache_mode, or set {hint}"


def test_topology_flags() -> None:
    plan = plan_of(base_spec("0.32.0", nodes=3) | {})
    for rank, node in enumerate(plan.nodes):
        expected = (f"--node-rank={rank}", "--headless") if rank else ("--node-rank=0",)
        assert node.argv[-len(expected) :] == expected
        assert node.common_argv == plan.nodes[0].common_argv
        assert f"--node-rank={rank}" in node.argv
        assert ("--headless" in node.argv) == (rank > 0)
        assert {
            "--distributed-executor-backend=mp",
            "--nnodes=3",
            "--master-addr=10.0.0.1",
            "--master-port=29501",
            "--port=8000",
        } <= set(node.argv)


def test_speculative_config_is_canonical_json() -> None:
    spec = edit(
        base_spec(), **{"serve.speculative_config": {"num_speculative_tokens": 3, "method": "qwen3_next_mtp"}}
    )
    plan = plan_of(spec)
    assert '--speculative-config={"method":"qwen3_next_mtp","num_speculative_tokens":3}' in argv(plan)
    assert derived(plan)["num_speculative_tokens"] == 3


def test_per_node_env_and_nothing_else_differs() -> None:
    spec = edit(base_spec(), env={"NCCL_DEBUG": "WARN", "VLLM_CPU_KVCACHE_SPACE": 1})
    spec["nodes"][1]["hca"] = ["roce0", "roce1"]
    plan = plan_of(spec)
    a, b = (n.env for n in plan.nodes)
    assert b["NCCL_IB_HCA"] == "roce0,roce1" and "NCCL_IB_HCA" not in a
    assert a["VLLM_HOST_IP"] == "10.0.0.1" and b["VLLM_HOST_IP"] == "10.0.0.2"
    assert a["VLLM_CPU_KVCACHE_SPACE"] == b["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert a["GLOO_SOCKET_IFNAME"] == a["NCCL_SOCKET_IFNAME"] == "eth0"


def test_unknown_release_can_borrow_a_catalog_explicitly() -> None:
    plan = plan_of(edit(base_spec("0.34.0"), **{"vllm.flags_from": "0.33.0"}))
    assert plan.catalog_version == "0.33.0"
    # 0.34 behaves like 0.33: the mode follows prefix caching, no flag.
    assert not any(a.startswith("--mamba-cache-mode") for a in argv(plan))


def test_secrets_appear_by_name_only() -> None:
    plan = plan_of(edit(base_spec(), secrets=["HF_TOKEN"]))
    for node in plan.nodes:
        assert node.secrets == ("HF_TOKEN",)
        assert "HF_TOKEN" not in node.env
