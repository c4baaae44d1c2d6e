"""What each node feeds its vLLM, gathered at once on every node: facts and model manifests.

Shared by `check` (which compares them), `lock` (which writes them down), `diff ... now` and
`up --locked` (which compare them with a lock or a run). One SSH call for the facts per node,
one per model directory for its manifest (cached in the node user's ~/.cache: seconds when unchanged).
"""

from __future__ import annotations

from launcher.core.answers.facts import Facts
from launcher.core.render import container_name
from launcher.core.sync.manifest import model_dirs
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import fan_out


def gather(cluster: Cluster) -> dict[str, Facts | SparkLaunchError]:
    """Every node's facts (vLLM install, engine env, network, host, memory) and manifests."""
    spec, plan = cluster.spec, cluster.plan
    ports = sorted({p for p in (plan.api_port, plan.master_port) if p is not None})

    def ask(name: str) -> Facts:
        node = next(n for n in spec.nodes if n.name == name)
        request = {
            "venv": spec.vllm.venv,
            "image": spec.vllm.image,
            "container": container_name(spec) if spec.vllm.runtime == "docker" else None,
            "interface": node.interface,
            "address": node.address,
            "ports": ports if name == cluster.head.name else [],
            "hcas": list(node.hca),
            "docker": spec.vllm.runtime == "docker",
        }
        agent = cluster.agents[name]
        found = agent.facts(request)
        found["models"] = {path: agent.manifest(path) for _, path in model_dirs(spec)}
        found["model"] = {"weight_bytes": found["models"][spec.model.path].total_bytes}
        return found

    return fan_out(cluster.names, ask)


def gathered(cluster: Cluster) -> dict[str, Facts]:
    """Every node's facts; the first node's error when one cannot be asked."""
    answers = gather(cluster)
    found: dict[str, Facts] = {}
    for name, answer in answers.items():
        if isinstance(answer, SparkLaunchError):
            raise answer
        found[name] = answer
    return found
