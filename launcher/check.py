"""`spark-launch check`: ask every node, in parallel, what would make it start differently.

Facts per node (one SSH call each): the vLLM install, the model files, the environment
vLLM will inherit, the interface and address, free ports, GPUs and memory. Then a real
TCP connection from every worker to a listener on the head, and the resolve probe: each
node's own vLLM runs create_engine_config() on exactly the argv and env it will run.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from launcher.cluster import Cluster
from launcher.compare import Report, Row, env_rows, host_rows, model_rows, network_rows, probe_rows, vllm_rows
from launcher.errors import ExitStatus, SparkLaunchError
from launcher.executor import fan_out
from launcher.plan import catalog_for
from launcher.render import shell_words

PROBE_SOURCE = (Path(__file__).parent / "probe.py").read_text()
MARKER = "SPARK_LAUNCH_PROBE "


class NodesDisagree(SparkLaunchError):
    """`check` found differences that would make the nodes start differently."""

    prefixed = False

    def __init__(self, report: Report, text: str) -> None:
        if report.unreachable:
            super().__init__("a node cannot be reached: nothing was started", "fix SSH to it first")
        else:
            super().__init__("the nodes are not alike: nothing was started", "fix the rows marked FAIL above")
        self.exit_status = ExitStatus.UNREACHABLE if report.unreachable else ExitStatus.NODES_DISAGREE
        self.report = report
        self.text = text

    def render(self) -> str:
        """The table, then the verdict."""
        return f"{self.text}\n{super().render()}"


def run_check(cluster: Cluster, probe: bool = True) -> Report:
    """Gather, test and compare everything; a Report with one row per compared item."""
    spec, plan = cluster.spec, cluster.plan
    head = plan.nodes[0]
    ports = sorted({int(d.value) for d in plan.derived if d.setting in ("port", "master_port")})

    def ask(agent_name: str) -> dict[str, Any]:
        node = next(n for n in spec.nodes if n.name == agent_name)
        request = {
            "venv": spec.vllm.venv,
            "image": spec.vllm.image,
            "model": spec.model.path,
            "interface": node.interface,
            "address": node.address,
            "ports": ports if agent_name == head.name else [],
        }
        return cluster.agents[agent_name].call("facts", json.dumps(request), timeout=120)

    answers = fan_out(cluster.names, ask)
    reached = {n: "yes" if isinstance(a, dict) else a.render().replace("\n", " ") for n, a in answers.items()}
    ok = all(v == "yes" for v in reached.values())
    rows = [
        Row("ssh", "reachable", reached, ok, None if ok else "fix SSH to the node first (see the message)")
    ]
    facts = {n: a for n, a in answers.items() if isinstance(a, dict)}
    if len(facts) < len(answers):
        return Report(tuple(cluster.names), tuple(rows))
    rows += vllm_rows(spec, facts) + model_rows(spec, facts) + env_rows(plan, facts)
    rows += network_rows(spec, plan, facts, _reachability(cluster, facts))
    rows += host_rows(facts, len(plan.nodes))
    if probe and spec.vllm.runtime == "docker":
        rows.append(
            Row(
                "probe",
                "not run for the docker runtime yet",
                {},
                False,
                "the image id row above shows whether the nodes run the same build",
                "warn",
            )
        )
    elif probe and all(f["vllm"].get("vllm_binary") for f in facts.values()):
        rows += probe_rows(plan, catalog_for(spec), _probe(cluster))
    return Report(tuple(cluster.names), tuple(rows))


def _reachability(cluster: Cluster, facts: dict[str, dict[str, Any]]) -> dict[str, str]:
    """A listener on the head's master port, and a real connection to it from every worker."""
    head = cluster.plan.nodes[0]
    workers = [n.name for n in cluster.plan.nodes[1:]]
    port = str(next(d.value for d in cluster.plan.derived if d.setting == "master_port"))
    if not workers or facts[head.name].get("ours_running"):
        return {}
    listening = threading.Event()
    answer: dict[str, Any] = {}

    def on_line(line: str) -> None:
        if '"listening"' in line:
            listening.set()
        elif line.startswith("{"):
            answer.update(json.loads(line))

    agent = cluster.agents[head.name]
    listener = threading.Thread(
        target=agent.stream,
        args=("listen", head.address, port, str(len(workers)), "15"),
        kwargs={"on_line": on_line},
        daemon=True,
    )
    listener.start()
    if not listening.wait(20):
        listener.join(20)
        return dict.fromkeys(workers, f"no listener on the head: {answer.get('error', 'timed out')}")
    results = fan_out(workers, lambda w: cluster.agents[w].call("connect", head.address, port, "5"))
    listener.join(20)
    return {w: _connected(r) for w, r in results.items()}


def _connected(answer: dict[str, Any] | SparkLaunchError) -> str:
    if isinstance(answer, SparkLaunchError):
        return answer.message
    return "yes" if answer.get("ok") else str(answer.get("error"))


def _probe(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """Each node's own vLLM resolves exactly the argv and env the plan runs there (secrets aside)."""
    venv = cluster.spec.vllm.venv

    def resolve(name: str) -> dict[str, Any]:
        node = next(n for n in cluster.plan.nodes if n.name == name)
        words = [
            "env",
            *[f"{k}={v}" for k, v in node.env.items()],
            f"{venv}/bin/python",
            "-",
            "resolve",
            *node.argv[2:],
        ]
        result = cluster.executor.run(name, shell_words(words), stdin=PROBE_SOURCE, timeout=600)
        lines = [x for x in result.stdout.splitlines() if x.startswith(MARKER)]
        if not lines:
            tail = (result.stderr or result.stdout).strip().splitlines()[-2:]
            return {"error": " / ".join(tail) or f"exit {result.exited}"}
        answer = json.loads(lines[-1][len(MARKER) :])
        return dict(answer["resolved"]) if answer.get("ok") else {"error": answer.get("error", "?")}

    answers = fan_out(cluster.names, resolve)
    return {n: a if isinstance(a, dict) else {"error": a.message} for n, a in answers.items()}


def report_text(report: Report) -> str:
    """The check as a table: one row per item, one column per node; failures marked."""
    width = max(len(r.item) for r in report.rows) + 2
    col = 26
    lines = [f"{'':<8}{'':<{width}}" + "".join(f"{n:<{col}}" for n in report.nodes)]
    for r in report.rows:
        mark = "ok  " if r.ok else ("FAIL" if r.level == "fail" else "warn")
        cells = "".join(f"{_cell(r.values.get(n, '')):<{col}}" for n in report.nodes) if r.values else ""
        lines.append(f"{mark:<5}{r.area:<9}{r.item:<{width}}{cells}".rstrip())
        if not r.ok:  # a failing value cut to fit its column is shown whole
            lines += [
                f"{'':<14}{n}: {v}" for n, v in r.values.items() if _cell(v) != str(v) and len(str(v)) > 24
            ]
        if r.hint:
            lines.append(f"{'':<14}-> {r.hint}")
    verdict = "the nodes are alike" if report.ok else "the nodes are NOT alike"
    return "\n".join([*lines, "", verdict])


def _cell(value: Any) -> str:
    text = "yes" if value is True else "NO" if value is False else str(value)
    return text if len(text) <= 24 else text[:23] + "…"
