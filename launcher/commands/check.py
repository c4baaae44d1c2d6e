"""`spark-launch check`: ask every node, in parallel, what would make it start differently.

Facts per node (one SSH call each): the vLLM install, the environment vLLM will inherit,
the interface and address, free ports, GPUs and memory; then the manifest of each model
directory (sha256 per file, cached beside the model: seconds when nothing changed). Then a real
TCP connection from every worker to a listener on the head, and the resolve probe: each
node's own vLLM runs create_engine_config() on exactly the argv and env it will run (for
the docker runtime: inside the image, as `up` would start the container).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from launcher.commands.inputs import gather
from launcher.commands.listening import Listener
from launcher.commands.preflight import preflight_rows_of
from launcher.core import remote
from launcher.core.answers.facts import Facts
from launcher.core.answers.probe import Probed, connected
from launcher.core.checks import (
    Report,
    Row,
    catalog_rows,
    env_rows,
    host_rows,
    image_release_row,
    memory_rows,
    model_rows,
    network_rows,
    planned_model_rows,
    probe_rows,
    regression_rows,
    vllm_rows,
)
from launcher.core.checks.memory import budgets
from launcher.core.reports import check_text
from launcher.core.terminal import Screen
from launcher.errors import SparkLaunchError
from launcher.load import catalog_for
from launcher.node.cluster import Cluster
from launcher.node.executor import fan_out
from launcher.node.scripts import tag as script_tag

__all__ = ["NodesDisagree", "run_check"]


class NodesDisagree(SparkLaunchError):
    """`check` found differences that would make the nodes start differently."""

    prefixed = False

    def __init__(self, report: Report) -> None:
        if report.unreachable:
            names = [n for n, v in report.rows[0].values.items() if v != "yes"]
            super().__init__(
                f"cannot reach {len(names)} of {len(report.nodes)} node(s) ({', '.join(names)}): "
                "nothing was compared",
                "the ssh row says why, and how to fix each",
            )
        elif {r.area for r in report.rows if r.failed} == {"memory"}:
            super().__init__(
                "the plan does not fit the nodes' memory: nothing was started",
                "the memory rows marked FAIL say what to change",
            )
        else:
            super().__init__("the nodes are not alike: nothing was started", "fix the rows marked FAIL above")
        self.exit_status = report.exit_status
        self.report = report

    def render(self) -> str:
        """The table, then the verdict."""
        return self.render_on(None, False)

    def render_on(self, width: int | None, color: bool) -> str:
        """The table fitted to the terminal (FAIL rows marked), then the verdict."""
        return f"{check_text(self.report, Screen(width, color))}\n{super().render()}"


def run_check(cluster: Cluster, probe: bool = True, fresh: bool = False, collective: bool = True) -> Report:
    """Gather, test and compare everything; a Report with one row per compared item.

    The probe (each node's vLLM resolving its command) runs alongside the other questions,
    answered from each node's cache when nothing it depends on changed (`fresh`: resolve anyway).
    docker runtime: the probe runs inside the image once every node is known to hold it.
    """
    early = probe and cluster.spec.vllm.runtime == "venv"
    with ThreadPoolExecutor(max_workers=1) as pool:
        probing = pool.submit(_probe, cluster, fresh) if early else None
        return _check(cluster, probing, probe_late=probe and not early, fresh=fresh, collective=collective)


def _check(
    cluster: Cluster,
    probing: Future[dict[str, dict[str, Any]]] | None,
    probe_late: bool,
    fresh: bool,
    collective: bool,
) -> Report:
    spec, plan = cluster.spec, cluster.plan
    answers = gather(cluster)
    reached = {n: a.reason if isinstance(a, SparkLaunchError) else "yes" for n, a in answers.items()}
    ok = all(v == "yes" for v in reached.values())
    hints = [f"{n}: {a.hint}" for n, a in answers.items() if isinstance(a, SparkLaunchError) and a.hint]
    rows = [
        Row("ssh", "reachable", reached, ok, None if ok else "\n".join(hints) or "fix SSH to the node first")
    ]
    facts = {n: a for n, a in answers.items() if not isinstance(a, SparkLaunchError)}
    if len(facts) < len(answers):
        return Report(tuple(cluster.names), tuple(rows))
    rows += vllm_rows(spec, facts) + catalog_rows(cluster.head.name, cluster.sources)
    rows += model_rows(spec, facts) + planned_model_rows(cluster.sources, facts) + env_rows(plan, facts)
    rows += network_rows(spec, plan, facts, _reachability(cluster, facts))
    rows += host_rows(spec, facts) + regression_rows(plan, facts) + memory_rows(spec, plan, facts)
    weighed = budgets(spec, plan, facts)
    runnable = _runnable(spec.vllm.runtime, facts)
    rows += preflight_rows_of(cluster, facts, runnable) if collective else []
    resolved = None
    if runnable:
        resolved = probing.result() if probing is not None else _probe(cluster, fresh) if probe_late else None
    if resolved is not None:
        cached = {
            n: "from the node's cache" if r.get("cached") else "resolved now" for n, r in resolved.items()
        }
        rows.append(Row("probe", "answers", cached, True, level="warn"))
        if spec.vllm.runtime == "docker" and not any("error" in r for r in resolved.values()):
            rows.append(image_release_row(spec, resolved))
        catalog = cluster.sources.catalog if cluster.sources else catalog_for(spec)
        rows += probe_rows(plan, catalog, resolved)
    return Report(tuple(cluster.names), tuple(rows), facts, weighed)


def _runnable(runtime: str, facts: dict[str, Facts]) -> bool:
    """True when every node holds the vLLM the probe runs: the venv's binary, or the image."""
    key = "image_id" if runtime == "docker" else "vllm_binary"
    return all(f["vllm"].get(key) for f in facts.values())


def _reachability(cluster: Cluster, facts: dict[str, Facts]) -> dict[str, str]:
    """A listener on the head's master port, and a real connection to it from every worker."""
    head = cluster.head
    workers = cluster.names[1:]
    port = cluster.plan.master_port
    if not workers or port is None or facts[head.name].get("ours_running"):
        return {}
    agent = cluster.agents[head.name]
    listener = Listener(agent, remote.listen_call(agent.dir, head.address, port, len(workers), 15))
    first = listener.first(20)
    if first.port is None:
        listener.join(20)
        return dict.fromkeys(workers, f"no listener on the head: {first.error}")
    results = fan_out(workers, lambda w: cluster.agents[w].ask(connect_call(cluster, w, port), connected))
    listener.join(20)
    return {w: r.reason if isinstance(r, SparkLaunchError) else r or "yes" for w, r in results.items()}


def connect_call(cluster: Cluster, worker: str, port: int) -> remote.Call:
    """A TCP connection from `worker` to the head's address on `port`."""
    return remote.connect_call(cluster.agents[worker].dir, cluster.head.address, port, 5)


def _probe(cluster: Cluster, fresh: bool) -> dict[str, dict[str, Any]]:
    """Each node's own vLLM resolves exactly the argv and env the plan runs there (secrets aside).

    For the probe rows, by node: what it resolved, or {"error": why it could not}.
    """
    version = script_tag("probe")

    def resolve(name: str) -> Probed:
        node = next(n for n in cluster.plan.nodes if n.name == name)
        return cluster.agents[name].probe(remote.probe_call(cluster.spec, node, version, fresh))

    answers = fan_out(cluster.names, resolve)
    return {n: _resolved(a) for n, a in answers.items()}


def _resolved(answer: Probed | SparkLaunchError) -> dict[str, Any]:
    if isinstance(answer, SparkLaunchError):
        return {"error": answer.reason}
    if answer.error is not None:
        return {"error": answer.error}
    return {**answer.resolved, "cached": answer.cached, "vllm_version": answer.vllm_version}
