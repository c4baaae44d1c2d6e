"""What `init` decides about the cluster, from every node's facts and the links tried. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.init import draft, interconnect
from launcher.core.init.draft import Decided, InitRequest
from launcher.core.init.interconnect import Choice


@dataclass(frozen=True, slots=True)
class Decisions:
    """Everything decided about the cluster, each with its reason."""

    request: InitRequest
    version: Decided
    place: Decided  # the venv or the image
    choice: Choice  # the fabric
    links_seen: Mapping[str, tuple[str, ...]]  # per node: every interface, for the comments
    path: Decided
    model_kind: Decided  # model.kind: decoder, hybrid, ... as the release's registry sees config.json
    gpus: Mapping[str, Decided]
    kind: str  # gb10, gpu or cpu
    facts: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Links:
    """Every node's usable links, the candidate pairs, and what was left out (and why)."""

    seen: dict[str, tuple[str, ...]]
    found: list[interconnect.Candidate]
    left_out: list[str]


def links(facts: Mapping[str, Mapping[str, Any]], names: tuple[str, ...]) -> Links:
    """The candidate links between the nodes, from each node's interfaces (names in rank order)."""
    per_node: dict[str, list[interconnect.Link]] = {}
    seen: dict[str, tuple[str, ...]] = {}
    left_out: list[str] = []
    for name in names:
        per_node[name], ignored = interconnect.node_links(name, facts[name])
        seen[name] = tuple(link.describe() for link in per_node[name])
        left_out += ignored
    found, alone = interconnect.candidates(per_node, list(names))
    return Links(seen, found, alone + left_out)


def decide(
    request: InitRequest,
    facts: Mapping[str, Mapping[str, Any]],
    found: Links,
    reach: Mapping[str, Mapping[str, str]],
) -> tuple[Decisions, list[str]]:
    """Every decision from the facts and the links tried; and the warnings to print."""
    choice = interconnect.choose(found.found, reach, found.left_out)
    version, place = draft.install(request, facts)
    path, model_kind, warnings = draft.model(request, facts, request.names[0])
    gpus, kind = draft.gpus(facts)
    decided = Decisions(request, version, place, choice, found.seen, path, model_kind, gpus, kind, facts)
    return decided, warnings


def header(request: InitRequest, filename: str) -> list[str]:
    """The comments at the top of the spec: where it came from, and what to do next."""
    hosts = ",".join(request.hosts)
    return [
        f"Written by `spark-launch init --hosts {hosts}` from what the nodes themselves reported.",
        "Each value says where it came from; a value written as <CHOOSE> needs your edit (the",
        "comment above it says what to choose from), and `spark-launch validate` lists them.",
        f"Next: spark-launch sync models {filename} (when a node lacks the model), then",
        f"      spark-launch check {filename}, then spark-launch up {filename}.",
    ]
