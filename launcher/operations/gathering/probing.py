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

from typing import Any

from launcher.core import remote
from launcher.core.answers.facts_answer import ProbeFound
from launcher.core.answers.probe_answer import Probed
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import fan_out
from launcher.node.scripts import tag as script_tag

__all__ = ["probe_tag", "run_probe"]


def probe_tag() -> str:
    """This probe's version: part of every cache key of its answers."""
    return script_tag("probe")


def run_probe(
    cluster: Cluster, looked: dict[str, ProbeFound | None], fresh: bool
) -> dict[str, dict[str, Any]]:
    """Per node: the values its vLLM resolved (plus `cached`, `vllm_version`), or {"error": ...}.

    `looked`: per node, what its facts call found in its probe cache."""
    version = probe_tag()

    def resolve(name: str) -> Probed:
        found = looked.get(name)
        if found is not None and found["cached"] is not None and not fresh:
            return found["cached"]
        node = next(n for n in cluster.plan.nodes if n.name == name)
        agent = cluster.agents[name]
        answer = agent.probe(remote.probe_call(cluster.spec, node, version, fresh))
        key = found["key"] if found is not None else None
        if cluster.spec.vllm.runtime == "docker" and key is not None and answer.error is None:
            kept = {"ok": True, "resolved": answer.resolved, "vllm_version": answer.vllm_version}
            agent.run(remote.probe_save_call(key, kept)).checked(name, "keeping the probe's answer")
        return answer

    return {n: _resolved(a) for n, a in fan_out(cluster.names, resolve).items()}


def _resolved(answer: Probed | SparkLaunchError) -> dict[str, Any]:
    if isinstance(answer, SparkLaunchError):
        return {"error": answer.reason}
    if answer.error is not None:
        return {"error": answer.error}
    return {**answer.resolved, "cached": answer.cached, "vllm_version": answer.vllm_version}
