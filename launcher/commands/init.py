"""`spark-launch init`: from host names to a commented spec, every value found on the nodes.

Asks every node at once (the discover script), tries each candidate link for real (a
listener on the head, a TCP connection from every worker), decides the rest from the
facts (core.draft, core.fabric), writes the derived serve settings with the values the
plan gives for the release found, and reads the text back through the loader: what still
needs an edit is reported by line, never guessed.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from launcher.catalogs import known_versions, load_catalog
from launcher.commands.facts import agents, all_facts
from launcher.commands.reporter import Reporter
from launcher.core import remote
from launcher.core.init import decide, draft, interconnect, spec_file
from launcher.core.init.spec_file import Written
from launcher.errors import SparkLaunchError
from launcher.node.agent import Agent
from launcher.node.executor import Executor, fan_out

CONNECT_SECONDS = 3.0  # a link that works answers in milliseconds
LISTEN_SECONDS = 8.0


@dataclass(frozen=True)
class InitResult:
    """The spec written, what was decided, and how long it took."""

    spec: Written
    choice: interconnect.Choice
    warnings: tuple[str, ...]
    facts: dict[str, dict[str, Any]]
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
    version = decisions.version.value
    catalog = load_catalog(version) if version in known_versions() else None
    spec = spec_file.compose(decisions, catalog, decide.header(request, filename), filename)
    lacking = draft.lacking_model(request, facts)
    return InitResult(spec, decisions.choice, tuple(warnings), facts, time.monotonic() - began, lacking)


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
    answered = threading.Event()
    lines: list[dict[str, Any]] = []

    def on_line(line: str) -> None:
        if line.startswith("{"):
            lines.append(json.loads(line))
            answered.set()

    def listen() -> None:
        try:
            agent.stream(
                remote.listen_call(agent.dir, head.address, 0, len(workers), LISTEN_SECONDS), on_line
            )
        except SparkLaunchError as exc:
            lines.append({"ok": False, "error": exc.message})
        answered.set()

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    if not answered.wait(LISTEN_SECONDS + 10) or not lines[0].get("listening"):
        error = lines[0].get("error", "no answer") if lines else "no answer"
        return {w.node: f"no listener on {head.node} {head.address}: {error}" for w in workers}
    port = int(lines[0]["port"])

    def connect(node: str) -> dict[str, Any]:
        return by_name[node].ask(remote.connect_call(by_name[node].dir, head.address, port, CONNECT_SECONDS))

    results = fan_out([w.node for w in workers], connect)
    reach = {
        node: r.reason if isinstance(r, SparkLaunchError) else "yes" if r.get("ok") else str(r.get("error"))
        for node, r in results.items()
    }
    if all(v == "yes" for v in reach.values()):
        listener.join(LISTEN_SECONDS + 5)  # ends as soon as every worker's connection arrived
        peers = set(lines[-1].get("peers", [])) if len(lines) > 1 else None
        for w in workers:
            if peers is not None and w.address not in peers:
                reach[w.node] = f"connected, but {head.node} saw no connection from {w.address}"
    return reach
