"""What each node feeds its vLLM, gathered at once on every node: facts and model manifests.

Shared by `check` (which compares them), `lock` (which writes them down), `diff ... now` and
`up --locked` (which compare them with a lock or a run). One SSH call per node answers it
all: the facts and the manifest of each model directory (cached in the node user's ~/.cache:
seconds when unchanged). For `check`, the head's call also listens on the master port
meanwhile (`listen`), and says when, so that the workers can connect to it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launcher.core import remote
from launcher.core.answers.facts_answer import Facts
from launcher.core.answers.probe_answer import Listening
from launcher.core.render import container_name
from launcher.core.sync.model_manifest import model_dirs
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.node.executor import fan_out

LISTEN_SECONDS = 15  # how long the head waits for the workers' connections
CONNECT_SECONDS = 5  # how long a worker tries to connect to the head's master port


def gather(
    cluster: Cluster,
    on_listening: Callable[[Listening], None] | None = None,
    probe_tag: str | None = None,
) -> dict[str, Facts | SparkLaunchError]:
    """Every node's facts (vLLM install, engine env, network, host, memory) and manifests.

    With `on_listening`, the head listens on the master port for every worker while it
    answers, and `on_listening` gets its word as soon as it listens (or cannot); each worker
    connects to it inside its own facts call (its answer's `connected`). With
    `probe_tag`, each node also says whether its probe cache holds the answer (`probe`).
    """
    spec, plan = cluster.spec, cluster.plan
    ports = sorted({p for p in (plan.api_port, plan.master_port) if p is not None})
    paths = [path for _, path in model_dirs(spec)]

    def ask(name: str) -> Facts:
        node = next(n for n in spec.nodes if n.name == name)
        head = name == cluster.head.name
        request: dict[str, Any] = {
            "venv": spec.vllm.venv,
            "image": spec.vllm.image,
            "container": container_name(spec) if spec.vllm.runtime == "docker" else None,
            "interface": node.interface,
            "address": node.address,
            "ports": ports if head else [],
            "models": paths,
            "hcas": list(node.hca),
            "docker": spec.vllm.runtime == "docker",
        }
        if probe_tag is not None:
            planned = next(n for n in plan.nodes if n.name == name)
            request["probe"] = remote.probe_request(spec, planned, probe_tag)
        fabric = on_listening is not None and len(plan.nodes) > 1 and plan.master_port is not None
        listens = head and fabric
        if listens:
            expect = len(plan.nodes) - 1
            request["listen"] = {"port": plan.master_port, "expect": expect, "seconds": LISTEN_SECONDS}
        elif fabric:
            to = cluster.head.address
            request["connect"] = {"address": to, "port": plan.master_port, "seconds": CONNECT_SECONDS}
        agent = cluster.agents[name]
        found = agent.facts(request, on_listening if listens else None)
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
