"""The release machine's report (scripts/release_report.py): what counts as a change, and what covers it.

Pure, so these run in the fast tier; the conformance tier rebuilds the committed report from
the real releases (test_real_vllm.py, test_the_release_machines_report_is_reproduced).
"""

from __future__ import annotations

import json
from typing import Any

from launcher.catalogs import CATALOG_DIR
from scripts import release_report


def result(**dump: str) -> dict[str, Any]:
    return {"ok": True, "resolved": {"config_dump": dump}}


OLD = {"plan/a/0": result(**{"cache_config.block_size": "16", "instance_id": "'1'"})}
NEW = {
    "plan/a/0": result(**{"cache_config.block_size": "64", "cache_config.new": "False", "instance_id": "'2'"})
}


def test_a_changed_value_and_a_new_field_are_changes_and_a_random_id_is_not() -> None:
    changes, compared = release_report.value_changes(OLD, NEW, [])
    assert compared == 1
    assert [c.id for c in changes] == ["value cache_config.block_size", "field added cache_config.new"]
    assert changes[0].detail == "16 -> 64 in 1 of 1 (plan/a/0)"


def test_a_change_no_entry_covers_fails_the_machine_and_says_which() -> None:
    report = release_report.Report("0.34.0", "0.33.0", 1, release_report.value_changes(OLD, NEW, [])[0])
    entry = {"change": "value cache_config.block_size", "as": "check", "by": "block_size", "why": "compared"}
    reviewed = release_report.review(report, [entry])
    assert not reviewed.ok
    assert reviewed.problems == [
        "not covered: field added cache_config.new ((absent) -> False in 1 of 1 (plan/a/0))"
    ]
    assert "NOT COVERED" in release_report.render(reviewed)


def test_an_entry_must_name_a_real_rule_or_row_and_say_why() -> None:
    report = release_report.Report("0.34.0", "0.33.0", 0, [])
    bad = [
        {"change": "x", "as": "rule", "by": "no_such_rule", "why": "w"},
        {"change": "y", "as": "check", "by": "no_such_row", "why": "w"},
        {"change": "z", "as": "no effect", "why": " "},
        {"change": "v", "as": "probe", "by": "no_such_function", "why": "w"},
    ]
    problems = release_report.review(report, bad).problems
    assert len(problems) == 4
    assert "no rule for 0.34.0 decides 'no_such_rule'" in problems[0]
    assert "compares no 'no_such_row'" in problems[1] and "says no reason" in problems[2]
    good = [
        {"change": "a", "as": "rule", "by": "gpu_memory_utilization", "why": "w"},
        {"change": "b", "as": "rule", "by": "VLLM_USE_V2_MODEL_RUNNER", "why": "w"},
        {"change": "c", "as": "check", "by": "vllm config hash", "why": "w"},
        {"change": "d", "as": "probe", "by": "vllm_hash", "why": "w"},
    ]
    assert release_report.review(release_report.Report("0.34.0", "0.33.0", 0, []), good).ok


def test_flags_added_removed_deprecated_and_changed_come_from_the_catalogs() -> None:
    old = json.loads((CATALOG_DIR / "vllm-0.33.0.json").read_text())
    new = json.loads((CATALOG_DIR / "vllm-0.34.0.json").read_text())
    ids = {c.id for c in release_report.flag_changes(old, new)}
    assert "flag added enable_extensible_kv_cache" in ids and "flag changed seed" in ids
    assert not any(i.startswith("flag removed") for i in ids)


def test_every_committed_review_entry_holds() -> None:
    """The entries name rules and rows that exist, for their release, with a reason."""
    for path in sorted(CATALOG_DIR.glob("review-*.json")):
        data = json.loads(path.read_text())
        report = release_report.review(
            release_report.Report(data["release"], data["baseline"], 0, []), data["entries"]
        )
        assert report.ok, (path.name, report.problems)
