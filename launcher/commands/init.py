"""`spark-launch init`: from host names to a commented spec, every value found on the nodes.

Asks every node at once (the discover script), tries each candidate link for real (a
listener on the head, a TCP connection from every worker), decides the rest from the
facts (core.draft, core.fabric), writes the derived serve settings with the values the
plan gives for the release found, and reads the text back through the loader: what still
needs an edit is reported by line, never guessed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from launcher.cache import learned_catalog
from launcher.catalogs import known_versions, load_catalog
from launcher.core import remote
from launcher.core.answers.discover_answer import Discovered
from launcher.core.answers.probe_answer import connected
from launcher.core.init import decide, draft, interconnect, spec_file
from launcher.core.init.spec_file import Written
from launcher.core.vllm.catalog import Catalog
from launcher.core.vllm.releases import release_for
from launcher.errors import SparkLaunchError
from launcher.node.agent import Agent
from launcher.node.executor import Executor, fan_out
from launcher.operations.gathering.discovering import agents, all_facts
from launcher.operations.gathering.listening import Listener
from launcher.operations.reporter import Reporter

CONNECT_SECONDS = 3.0  # a link that works answers in milliseconds
LISTEN_SECONDS = 8.0


@dataclass(frozen=True, slots=True)
class InitResult:
    """The spec written, what was decided, and how long it took."""

    spec: Written
    choice: interconnect.Choice
    warnings: tuple[str, ...]
    facts: dict[str, Discovered]
    seconds: float
    lacking_model: tuple[str, ...] = ()  # nodes `sync models` must copy the model to


def init(executor: Executor, request: draft.InitRequest, filename: str, reporter: Reporter) -> InitResult:
    """Ask the nodes, try the links, decide, and return the spec text (nothing is written here)."""
    began = time.monotonic()
    names = request.names
    by_name = agents(executor, names)
    reporter.info(f"asking {len(names)} node(s): interfaces, RDMA devices, GPUs, vLLM, model")
    facts = all_facts(by_name, draft.discover_request(request))
    found = decide.links(facts, names)
    if len(names) > 1 and found.found:
        reporter.info(
            f"trying {len(found.found)} candidate link(s): a TCP connection from every worker to the head"
        )
    decisions, warnings = decide.decide(request, facts, found, try_links(by_name, found.found))
    catalog = _catalog(decisions.version.value)
    spec = spec_file.compose(decisions, catalog, decide.header(request, filename), filename)
    lacking = draft.lacking_model(request, facts)
    return InitResult(spec, decisions.choice, tuple(warnings), facts, time.monotonic() - began, lacking)


def _catalog(version: str | None) -> Catalog | None:
    """The catalog the nodes' version plans with: committed, or learned from a node earlier."""
    if version is None:
        return None
    try:
        committed = release_for(version, known_versions()).catalog
    except ValueError:  # no version, or one older than every supported release
        return None
    if committed:
        return load_catalog(committed)
    learned = learned_catalog(version)
    return learned[0] if learned else None


def try_links(by_name: dict[str, Agent], found: list[interconnect.Candidate]) -> dict[str, dict[str, str]]:
    """For each candidate, by head address: every worker's real TCP connection ('yes' or why not)."""
    if not found or len(found[0].links) < 2:
        return {}
    answers = fan_out([c.head.address for c in found], lambda a: _try(by_name, _by_head(found, a)))
    return {a: r if isinstance(r, dict) else {"(all)": r.message} for a, r in answers.items()}


def _by_head(found: list[interconnect.Candidate], address: str) -> interconnect.Candidate:
    return next(c for c in found if c.head.address == address)


def _try(by_name: dict[str, Agent], candidate: interconnect.Candidate) -> dict[str, str]:
    """A listener on the head's address (any free port), a connection from every worker."""
    head, workers = candidate.head, candidate.links[1:]
    agent = by_name[head.node]
    listener = Listener(agent, remote.listen_call(agent.dir, head.address, 0, len(workers), LISTEN_SECONDS))
    first = listener.first(LISTEN_SECONDS + 10)
    if first.port is None:
        return {w.node: f"no listener on {head.node} {head.address}: {first.error}" for w in workers}
    port = first.port

    def connect(node: str) -> str | None:
        call = remote.connect_call(by_name[node].dir, head.address, port, CONNECT_SECONDS)
        return by_name[node].ask(call, connected)

    results = fan_out([w.node for w in workers], connect)
    reach = {node: r.reason if isinstance(r, SparkLaunchError) else r or "yes" for node, r in results.items()}
    if all(v == "yes" for v in reach.values()):
        seen = listener.join(LISTEN_SECONDS + 5)  # ends as soon as every worker's connection arrived
        for w in workers:
            if seen is not None and w.address not in seen:
                reach[w.node] = f"connected, but {head.node} saw no connection from {w.address}"
    return reach
