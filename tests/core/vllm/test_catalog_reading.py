"""A learned flag catalog is read like every node answer: each option's flags are its key's own,
and what loads code or opens files on the nodes is rendered only when the spec sets it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from launcher.catalogs import CATALOG_DIR, known_versions
from launcher.core.answers.catalog_answer import catalog_document, differences
from launcher.core.answers.read import BadAnswer
from launcher.core.plan import PlanProblems, build_plan
from launcher.core.vllm.catalog import ALIASES, CODE_OR_FILES, catalog_from_dict, own_flags
from launcher.core.vllm.models import kind_facts
from tests.conftest import base_spec, edit, spec_of


def committed(version: str) -> dict[str, Any]:
    return json.loads((CATALOG_DIR / f"vllm-{version}.json").read_text())


@pytest.mark.parametrize("version", known_versions())
def test_every_committed_catalog_reads_strictly_and_unchanged(version: str) -> None:
    data = committed(version)
    read = catalog_document(data)
    del data["generated_by"]
    assert read == data


def test_the_aliases_allowed_are_exactly_those_the_committed_catalogs_show() -> None:
    shown: dict[str, set[str]] = {}
    for version in known_versions():
        for key, option in committed(version)["options"].items():
            bare = own_flags(key) - ALIASES.get(key, frozenset())
            others = set(option["flags"] + option.get("negative", [])) - bare
            if others:
                shown.setdefault(key, set()).update(others)
    assert shown == {k: set(v) for k, v in ALIASES.items()}


def test_every_key_that_loads_code_or_opens_files_is_a_real_option() -> None:
    options = set().union(*(committed(v)["options"] for v in known_versions()))
    assert options >= CODE_OR_FILES, sorted(CODE_OR_FILES - options)


def test_own_flags_pair_enable_and_disable_and_nothing_else() -> None:
    assert own_flags("enable_prefix_caching") == {
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--disable-prefix-caching",
        "--no-disable-prefix-caching",
    }
    assert own_flags("trust_remote_code") == {"--trust-remote-code", "--no-trust-remote-code"}


def forged(path: str, value: Any) -> dict[str, Any]:
    """The 0.33 catalog with one value changed (`options.KEY.FIELD`), as a node could send it."""
    data = copy.deepcopy(committed("0.33.0"))
    *parents, last = path.split(".")
    place = data
    for part in parents:
        place = place[part]
    place[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (
            "options.enable_prefix_caching.flags",
            ["--trust-remote-code"],
            "is not a flag of enable_prefix_caching",
        ),
        (
            "options.enable_prefix_caching.negative",
            ["--worker-cls"],
            "is not a flag of enable_prefix_caching",
        ),
        ("options.max_model_len.flags", ["--max-model-len=1", "--x"], "is not a flag of max_model_len"),
        ("options.max_model_len.flags", [], "has no flag"),
        ("options.max_model_len.kind", "code", "is not one of bool, flag, value"),
        ("options.max_model_len.type", "python", "is not one of"),
        ("options.max_model_len.nargs", "many", "is not one of +, *, ?"),
        ("options.dtype.choices", ["auto", "half\x1b[2J"], "control character"),
        ("options.gpu_memory_utilization.bounds", {"gt": "0"}, "expected a number"),
        ("options.tensor_parallel_size.short", ["-tp x"], "is not a short option"),
        ("options.Bad-Key", {"flags": ["--bad-key"], "kind": "flag"}, "is not an option's name"),
        ("models.architectures.Qwen3NextForCausalLM.hybrid", "yes", "expected true or false"),
        ("models.mla_model_types", ["ok", "../x"], "is not a plain name"),
        ("vllm_version", "0.33\n", "control character"),
    ],
)
def test_a_forged_catalog_is_refused_saying_where(path: str, value: Any, says: str) -> None:
    with pytest.raises(BadAnswer) as caught:
        catalog_document(forged(path, value))
    assert says in str(caught.value), caught.value


def test_two_catalogs_that_differ_are_told_apart_by_option() -> None:
    one = catalog_document(committed("0.33.0"))
    other = catalog_document(forged("options.enable_prefix_caching.negative", ["--no-enable-prefix-caching"]))
    assert differences(one, other) == ["option enable_prefix_caching"]
    assert differences(one, one) == []


def test_a_catalog_mapping_a_pinned_setting_to_remote_code_never_reaches_the_command_line() -> None:
    """Even past the reader (a catalog built without it): the plan refuses to render it."""
    spec = spec_of(base_spec("0.33.0"))
    catalog = catalog_from_dict(
        forged("options.enable_prefix_caching", {"flags": ["--trust-remote-code"], "kind": "bool"}), "forged"
    )
    with pytest.raises(PlanProblems) as caught:
        build_plan(spec, kind_facts("hybrid", "test"), catalog)
    (problem,) = caught.value.problems
    assert problem.dotted == "serve.trust_remote_code"
    assert "--trust-remote-code" in problem.message and "the spec does not set it" in problem.message


def test_the_spec_may_still_set_what_loads_code_itself() -> None:
    spec = spec_of(edit(base_spec("0.33.0"), **{"serve.trust_remote_code": True}))
    catalog = catalog_from_dict(committed("0.33.0"))
    plan = build_plan(spec, kind_facts("hybrid", "test"), catalog)
    assert "--trust-remote-code" in plan.nodes[0].argv
