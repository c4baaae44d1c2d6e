"""Every plan row says where its value came from: the spec, the launcher, vLLM's own default
(pinned), or the model's files; in the text and in the JSON. And the text fits a terminal."""

from __future__ import annotations

import json
from typing import Any

import pytest

from launcher.core.rows import SOURCES
from launcher.core.terminal import Screen
from launcher.core.views import plan_dict, plan_text
from launcher.load import plan_file, plan_fleet
from tests.conftest import ROOT, base_spec, edit, plan_of

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def sources(data: dict[str, Any]) -> dict[str, str]:
    return {d.setting: d.source for d in plan_of(data).derived}


def test_a_value_the_spec_sets_is_from_the_spec() -> None:
    found = sources(edit(base_spec(), **{"serve.port": 8100, "serve.enable_chunked_prefill": True}))
    assert found["port"] == "spec"
    assert found["enable_chunked_prefill"] == "spec"
    assert found["enable_prefix_caching"] == "spec"
    assert found["tensor_parallel_size"] == "spec"


def test_a_value_left_unset_is_vllms_default_pinned_or_the_launchers() -> None:
    found = sources(base_spec())
    assert found["port"] == "vllm-default"
    assert found["master_port"] == "vllm-default"
    assert found["enable_chunked_prefill"] == "vllm-default"
    assert found["mamba_cache_mode"] == "vllm-default"
    assert found["nnodes"] == "launcher"
    assert found["master_addr"] == "launcher"
    assert found["node_rank"] == "launcher"
    assert found["model"] == "model"


def test_model_traits_declared_in_the_spec_are_from_the_spec(tmp_path: Any) -> None:
    from tests.conftest import write

    _, plan = plan_file(write(tmp_path, edit(base_spec(), **{"model.hybrid": True})))
    assert {d.setting: d.source for d in plan.derived}["is_hybrid"] == "spec"


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_row_has_a_known_source_in_text_and_json(path: Any) -> None:
    for deployed in plan_fleet(path).deployments:  # each deployment of the file is a plan of its own
        plan = deployed.plan
        doc = json.loads(json.dumps(plan_dict(plan)))
        assert all(d["source"] in SOURCES for d in doc["derived"])
        text = plan_text(plan)
        for d in plan.derived:
            assert any(
                line.lstrip().startswith(d.setting) and line.endswith(f"[{d.source}]")
                for line in text.splitlines()
            )


def test_the_text_of_a_spec_set_row_does_not_say_it_is_unset() -> None:
    text = plan_text(plan_of(edit(base_spec(), **{"serve.enable_prefix_caching": True})))
    row = next(line for line in text.splitlines() if line.lstrip().startswith("enable_prefix_caching"))
    why = text.splitlines()[text.splitlines().index(row) + 1]
    assert row.endswith("[spec]")
    assert "left unset, each node would derive it" in why and "why: unset," not in why


def test_the_plan_fits_the_terminal_but_for_words_that_cannot_break() -> None:
    _, plan = plan_file(ROOT / "configs" / "qwen3-next-2x-spark.yaml")
    lines = plan_text(plan, Screen(width=80)).splitlines()
    wide = [line for line in lines if len(line) > 80]
    assert all(" " not in line.strip() or line.strip().count(" ") <= 1 for line in wide), wide
    assert max(map(len, plan_text(plan).splitlines())) > 200  # piped: one row a line, for scripts


def test_a_terminal_gets_the_source_dimmed_and_a_pipe_plain() -> None:
    plan = plan_of(base_spec())
    assert "\x1b[" not in plan_text(plan)
    assert "\x1b[2m[launcher]\x1b[0m" in plan_text(plan, Screen(width=100, color=True))
