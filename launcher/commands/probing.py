"""The resolve probe on every node at once: each node's own vLLM derives its exact command.

Each node's facts call has already looked in the node's probe cache (`facts.probe_lookup`,
keyed by everything that decides the answer): a node whose answer is there is not asked
again, so an unchanged cluster starts no vLLM and no container to be probed. The others
run the probe: venv runtime, under the node's vLLM Python (which caches its answer);
docker runtime, inside the image, in a container started for it, its answer then kept on
the node under the key the facts call gave. `fresh` resolves everywhere (and refreshes the
caches).
"""

from __future__ import annotations

import json
from typing import Any

from launcher.core import remote
from launcher.node.agent import Agent
from launcher.node.cluster import Cluster
from launcher.node.executor import fan_out
from launcher.node.scripts import tag as script_tag
from launcher.node.scripts.probe import MARKER as PROBE_MARKER

__all__ = ["probe_tag", "run_probe"]


def probe_tag() -> str:
    """This probe's version: part of every cache key of its answers."""
    return script_tag("probe")


def run_probe(cluster: Cluster, looked: dict[str, Any], fresh: bool) -> dict[str, dict[str, Any]]:
    """Per node: the values its vLLM resolved (plus `cached`, `vllm_version`), or {"error": ...}.

    `looked`: per node, what its facts call found in its probe cache ({"key", "cached"})."""
    version = probe_tag()

    def resolve(name: str) -> dict[str, Any]:
        found = looked.get(name) or {}
        if isinstance(found.get("cached"), dict) and not fresh:
            return _resolved({**found["cached"], "cached": True})
        node = next(n for n in cluster.plan.nodes if n.name == name)
        agent = cluster.agents[name]
        answer = _answer(agent, remote.probe_call(cluster.spec, node, version, fresh))
        key = found.get("key")
        if cluster.spec.vllm.runtime == "docker" and isinstance(key, str) and answer.get("ok"):
            agent.run(remote.probe_save_call(key, answer)).checked(name, "keeping the probe's answer")
        return _resolved(answer)

    answers = fan_out(cluster.names, resolve)
    return {n: a if isinstance(a, dict) else {"error": a.reason} for n, a in answers.items()}


def _answer(agent: Agent, call: remote.Call) -> dict[str, Any]:
    """The probe's answer line, or what it said instead."""
    result = agent.run(call)
    lines = [x for x in result.stdout.splitlines() if x.startswith(PROBE_MARKER)]
    if not lines:
        tail = (result.stderr or result.stdout).strip().splitlines()[-2:]
        return {"ok": False, "error": " / ".join(tail) or f"exit {result.exited}"}
    answer: dict[str, Any] = json.loads(lines[-1][len(PROBE_MARKER) :])
    return answer


def _resolved(answer: dict[str, Any]) -> dict[str, Any]:
    if not answer.get("ok"):
        return {"error": answer.get("error", "?")}
    cached, version = bool(answer.get("cached")), answer.get("vllm_version")
    return {**answer["resolved"], "cached": cached, "vllm_version": version}
