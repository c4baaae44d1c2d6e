"""The resolve probe on every node at once: each node's own vLLM derives its exact command.

venv runtime: the probe runs under the node's vLLM Python and answers from its cache on
the node when nothing that decides the answer changed. docker runtime: the probe runs
inside the image, in a container started for it; its answer is cached on the node by the
image's id and the probe's exact command (`core.remote.probe_lookup_call`), so that an
unchanged node answers without starting a container at all. `fresh` resolves anyway (and
refreshes the cache).
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

__all__ = ["run_probe"]


def run_probe(cluster: Cluster, fresh: bool) -> dict[str, dict[str, Any]]:
    """Per node: the values its vLLM resolved (plus `cached`, `vllm_version`), or {"error": ...}."""
    version = script_tag("probe")

    def resolve(name: str) -> dict[str, Any]:
        node = next(n for n in cluster.plan.nodes if n.name == name)
        call = remote.probe_call(cluster.spec, node, version, fresh)
        agent = cluster.agents[name]
        if cluster.spec.vllm.runtime != "docker":
            return _resolved(_answer(agent, call))
        looked = agent.ask(remote.probe_lookup_call(agent.dir, cluster.spec, call, version))
        key, cached = looked.get("key"), looked.get("cached")
        if isinstance(cached, dict) and not fresh:
            return _resolved({**cached, "cached": True})
        answer = _answer(agent, call)
        if key and answer.get("ok"):
            agent.run(remote.probe_save_call(str(key), answer)).checked(name, "keeping the probe's answer")
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
    return {
        **answer["resolved"],
        "cached": bool(answer.get("cached")),
        "vllm_version": answer.get("vllm_version"),
    }
