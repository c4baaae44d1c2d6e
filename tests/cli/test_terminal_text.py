"""What a terminal shows: the check table narrowed to its width with FAIL rows marked, plain
when piped; and init's closing line, which names `sync models` when a node lacks the model."""

from __future__ import annotations

import json
from typing import Any

from launcher.cli.init_commands import next_steps
from launcher.commands.init import init
from launcher.core.checks import Report, env_rows, model_rows, network_rows, vllm_rows
from launcher.core.reports import check_text
from launcher.core.terminal import Screen
from launcher.operations.reporter import Silent
from tests.commands.test_init_command import REQUEST, scripted
from tests.core.checks.test_checks import node_facts, plan_and_spec, read

RED = "\x1b[1;31m"


def report() -> Report:
    spec, plan = plan_and_spec()
    facts = {"n1": node_facts(), "n2": node_facts(vllm__vllm_build="b2", env__VLLM_USE_V2_MODEL_RUNNER="1")}
    rows = vllm_rows(spec, facts) + model_rows(spec, read(facts)) + env_rows(plan, facts)
    far = "connection refused by 10.0.0.1:29501 (is anything listening there?), after three tries"
    rows += network_rows(spec, plan, facts, {"n2": far})
    return Report(("n1", "n2"), tuple(rows))


def test_the_check_table_fits_an_80_column_terminal_and_marks_failures() -> None:
    text = check_text(report(), Screen(width=80, color=True))
    plain = text.replace(RED, "").replace("\x1b[0m", "")
    assert max(map(len, plain.splitlines())) <= 80
    assert f"{RED}FAIL\x1b[0m vllm     vllm build (files)" in text
    words = " ".join(plain.split())  # a failing value cut to fit its column is shown whole, wrapped
    assert (
        "n2: connection refused by 10.0.0.1:29501 (is anything listening there?), after three tries" in words
    )
    assert text.endswith(f"{RED}the nodes are NOT alike\x1b[0m")


def test_piped_the_table_is_plain_and_each_row_one_line() -> None:
    text = check_text(report())
    assert "\x1b[" not in text
    assert max(map(len, text.splitlines())) > 80  # a hint is one line, for grep


def test_the_header_names_each_node_above_its_column() -> None:
    lines = check_text(report(), Screen(width=100)).splitlines()
    row = next(line for line in lines if "vllm build (files)" in line)
    assert lines[0].index("n1") == row.index("b1") and lines[0].index("n2") == row.index("b2")


def test_init_names_sync_models_first_when_a_node_lacks_the_model() -> None:
    executor = scripted()
    lacking = executor.handlers[("node2", "discover")]

    def without_model(words: list[str]) -> Any:
        facts = json.loads(json.dumps(lacking(words)))
        facts["model"] = {"path": "/models/m", "exists": False}
        return facts

    executor.handlers[("node2", "discover")] = without_model
    result = init(executor, REQUEST, "bed.yaml", Silent())
    assert result.lacking_model == ("node2",)
    assert next_steps("bed.yaml", result) == (
        "spark-launch sync models bed.yaml (the model is not complete on node2), "
        "then spark-launch check bed.yaml, then spark-launch up bed.yaml"
    )


def test_init_goes_to_check_when_every_node_has_the_model() -> None:
    result = init(scripted(), REQUEST, "bed.yaml", Silent())
    assert next_steps("bed.yaml", result) == "spark-launch check bed.yaml, then spark-launch up bed.yaml"
