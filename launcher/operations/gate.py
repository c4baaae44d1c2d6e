"""The gate (`check`, and `up` before it starts): ask every node at once what would make it start
differently.

One SSH call per node answers its facts: the vLLM install, the environment vLLM will
inherit, the interface and address, free ports, GPUs and memory, the manifest of each model
directory (sha256 per file, cached beside the model: seconds when nothing changed), and
whether the node's probe cache holds the answer to exactly what the probe would be asked.
While the head answers, it listens on the master port, and every worker, inside its own
facts call, makes a real TCP connection to it as soon as it does. Then the resolve probe,
only where its answer was not found: each node's own vLLM runs create_engine_config() on
exactly the argv and env it will run (for the docker runtime: inside the image, as `up`
would start the container). An
unchanged cluster is checked in one round trip per node, nothing started on any of them.
"""

from __future__ import annotations

from dataclasses import replace

from launcher.core.answers.facts_answer import Facts
from launcher.core.answers.probe_answer import Listening
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
    rules_row,
    vllm_rows,
)
from launcher.core.checks.exposure_rows import endpoint_row, exposure_rows
from launcher.core.checks.memory_rows import budgets, shared_memory_row
from launcher.core.reports import check_text
from launcher.core.terminal import Screen
from launcher.errors import SparkLaunchError
from launcher.load import catalog_for, release_of
from launcher.node.cluster import Cluster
from launcher.operations.fleet import Deployments
from launcher.operations.gathering.gather_inputs import gather
from launcher.operations.gathering.preflight_run import preflight_rows_of
from launcher.operations.gathering.probing import probe_tag, run_probe
from launcher.operations.running.endpoint import router_check

__all__ = ["NodesDisagree", "merge_reports", "run_check", "with_endpoint"]

RUNNING = "not tested: this cluster runs and holds the port"


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

    With `probe`, each node's vLLM resolving its command, where every node holds the vLLM it
    runs (the venv, or the image): answered from each node's cache, found by its facts call,
    when nothing the answer depends on changed (`fresh`: resolve anyway).
    """
    return _check(cluster, _Reach(cluster), probe, fresh, collective)


def _check(cluster: Cluster, reach: _Reach, probe: bool, fresh: bool, collective: bool) -> Report:
    spec, plan = cluster.spec, cluster.plan
    answers = gather(cluster, reach.on_listening, probe_tag() if probe else None)
    reached = {n: a.reason if isinstance(a, SparkLaunchError) else "yes" for n, a in answers.items()}
    ok = all(v == "yes" for v in reached.values())
    hints = [f"{n}: {a.hint}" for n, a in answers.items() if isinstance(a, SparkLaunchError) and a.hint]
    rows = [
        Row("ssh", "reachable", reached, ok, None if ok else "\n".join(hints) or "fix SSH to the node first")
    ]
    facts = {n: a for n, a in answers.items() if not isinstance(a, SparkLaunchError)}
    if len(facts) < len(answers):
        return Report(tuple(cluster.names), tuple(rows))
    rows += [*vllm_rows(spec, facts), rules_row(cluster.head.name, release_of(spec))]
    rows += catalog_rows(cluster.head.name, cluster.sources)
    rows += model_rows(spec, facts) + planned_model_rows(cluster.sources, facts) + env_rows(plan, facts)
    rows += network_rows(spec, plan, facts, reach.result(facts)) + exposure_rows(spec, plan, collective)
    rows += host_rows(spec, facts) + regression_rows(plan, facts) + memory_rows(spec, plan, facts)
    weighed = budgets(spec, plan, facts)
    runnable = _runnable(spec.vllm.runtime, facts)
    rows += preflight_rows_of(cluster, facts, runnable) if collective else []
    resolved = None
    if probe and runnable:
        resolved = run_probe(cluster, {n: f.get("probe") for n, f in facts.items()}, fresh)
    else:
        rows.append(_unprobed(spec.vllm.runtime, facts, probe))
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


def _unprobed(runtime: str, facts: dict[str, Facts], asked: bool) -> Row:
    """The probe's row when it did not run: said, never left out. Asked to skip it, a warning;
    unable to run it (a node without the vLLM it would run), no agreement."""
    if not asked:
        values = dict.fromkeys(facts, "not run (--no-probe)")
        hint = "what each node's vLLM derives from its command was not compared: run check without --no-probe"
        return Row("probe", "vLLM resolves the command", values, False, hint, level="warn")
    key = "image_id" if runtime == "docker" else "vllm_binary"
    values = {
        n: "not run" if f["vllm"].get(key) else "not run: no vLLM to run here" for n, f in facts.items()
    }
    hint = "install the spec's vLLM on every node (the vllm rows say what is missing), then check again"
    return Row("probe", "vLLM resolves the command", values, False, hint)


def _runnable(runtime: str, facts: dict[str, Facts]) -> bool:
    """True when every node holds the vLLM the probe runs: the venv's binary, or the image."""
    key = "image_id" if runtime == "docker" else "vllm_binary"
    return all(f["vllm"].get(key) for f in facts.values())


class _Reach:
    """A real connection from every worker to the head's master port, made while the nodes
    gather their facts, in the same calls: the head listens inside its facts call and says
    so; each worker connects inside its own, trying again until the head listens."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.workers = cluster.names[1:]
        self.said: Listening | None = None  # the head's word: listening, or why not

    def on_listening(self, event: Listening) -> None:
        """The head listens (or cannot)."""
        self.said = event

    def result(self, facts: dict[str, Facts]) -> dict[str, str]:
        """Per worker: "yes", or why it could not connect; nothing while this cluster runs."""
        head = facts[self.cluster.head.name]
        if not self.workers:
            return {}
        if head.get("ours_running"):
            return dict.fromkeys(self.workers, RUNNING)
        if self.said is None:
            return dict.fromkeys(self.workers, "not tested: the head never said whether it listens")
        if self.said.port is None:
            return dict.fromkeys(self.workers, f"no listener on the head: {self.said.error}")
        return {w: facts[w].get("connected") or "not asked to connect" for w in self.workers}


def merge_reports(reports: dict[str, Report]) -> Report:
    """One report of several deployments' checks: each row named by its deployment, then the memory
    all of them claim of a node together."""
    nodes = tuple(dict.fromkeys(n for r in reports.values() for n in r.nodes))
    if len(reports) == 1:
        return next(iter(reports.values()))
    rows = [replace(row, item=f"[{name}] {row.item}") for name, r in reports.items() for row in r.rows]
    shared = shared_memory_row({n: r.memory for n, r in reports.items()})
    return Report(nodes, (*rows, *([shared] if shared else [])))


def with_endpoint(report: Report, deployments: Deployments) -> Report:
    """The report, and (for every deployment, where there is an endpoint) the router's rows: the
    pinned release, where it listens and with which key."""
    if deployments.endpoint is None or not deployments.whole:
        return report
    rows = (router_check(deployments.endpoint), endpoint_row(deployments.endpoint.plan))
    return replace(report, rows=(*report.rows, *rows))
