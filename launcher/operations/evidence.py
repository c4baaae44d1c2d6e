"""Evidence of a failure, taken before anything is stopped: every rank's Python stacks and log tail.

Each node dumps its Python processes of ours with py-spy (node script `stacks`) and keeps the
files in its run directory (`evidence/<run id>-<time>/`); the texts come back, secret values
replaced, into the run's receipt and beside it on this machine, where `diagnose` bundles
them. A node without py-spy gives its log tail and says how to install py-spy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from launcher.core import remote
from launcher.core.answers.probe_answer import captured
from launcher.core.redact import redact
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.operations.receipt_store import now, runs_dir, write_private


@dataclass(frozen=True, slots=True)
class Evidence:
    """What was captured: the receipt's entry, the run it belongs to, and the files written here."""

    entry: dict[str, Any]
    run_id: str | None
    files: tuple[str, ...]

    def said(self) -> str:
        """For an event: what each node gave, and where the files are."""
        parts = []
        for node, found in self.entry["nodes"].items():
            if "error" in found:
                parts.append(f"{node}: not captured ({found['error']})")
            elif found.get("py_spy"):
                ok = sum(1 for p in found["processes"] if p.get("ok"))
                parts.append(f"{node}: stacks of {ok}/{len(found['processes'])} process(es)")
            else:
                parts.append(f"{node}: log tail only (no py-spy)")
        return "; ".join(parts)


def capture(cluster: Cluster, why: str, secrets: dict[str, str], run_id: str | None = None) -> Evidence:
    """Stacks and log tails of every node, now; kept on the nodes, here and (by the caller) in the receipt."""
    request = {"run_id": run_id, "venv": cluster.spec.vllm.venv, "lines": 200, "why": why}
    began = time.monotonic()
    answers = cluster.each(lambda agent: agent.ask(remote.stacks_call(agent.dir, request), captured))
    nodes: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for name, answer in answers.items():
        if isinstance(answer, SparkLaunchError):
            nodes[name] = {"error": answer.message}
            continue
        run_id = run_id or answer.get("run_id")
        found = {k: answer.get(k) for k in ("py_spy", "hint", "ptrace", "processes", "python_pids")}
        found["files_on_node"] = answer.get("files", {})
        said = {k: redact(v, secrets.values()) for k, v in (answer.get("texts") or {}).items()}
        found["texts"] = said
        nodes[name] = found
        texts.update({f"{name}-{k}": v for k, v in said.items()})
    files = _keep(cluster.spec.name, run_id, texts)
    for name, found in nodes.items():
        found["files"] = [f for f in files if f.rsplit("/", 1)[-1].startswith(f"{name}-")]
    entry = {"time": now(), "why": why, "seconds": round(time.monotonic() - began, 2), "nodes": nodes}
    return Evidence(entry, run_id, tuple(files))


def _keep(cluster: str, run_id: str | None, texts: dict[str, str]) -> list[str]:
    """The texts as files beside the run's receipt here; their paths."""
    folder = runs_dir(cluster) / (run_id or "unknown") / "evidence" / time.strftime("%Y%m%dT%H%M%S")
    paths = []
    for name, text in sorted(texts.items()):
        write_private(folder / name, text)
        paths.append(str(folder / name))
    return paths
