"""Evidence of a failure, taken before anything is stopped: every rank's Python stacks and log tail.

Each node dumps its Python processes of ours with py-spy (node script `stacks`) and keeps the
files in its run directory (`evidence/<run id>-<time>/`); the texts come back, secret values
replaced, into the run's receipt and beside it on this machine, where `diagnose` bundles
them. A node without py-spy gives its log tail and says how to install py-spy.

The answers are data: the run they are filed under is the launcher's own (the one it started),
never the node's word; a file's name from a node is flattened to one plain part, and every
path is proven to stay inside the state folder (`receipt_store.inside`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from launcher.core import remote
from launcher.core.answers.probe_answer import captured
from launcher.core.answers.read import flat_name, is_run_id
from launcher.core.redact import redact
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster
from launcher.operations.receipt_store import inside, now, runs_dir, write_private


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
    """Stacks and log tails of every node, now; kept on the nodes, here and (by the caller) in the
    receipt of `run_id` (the launcher's; None: a run it does not know, filed as `unknown`)."""
    run_id = run_id if is_run_id(run_id) else None
    request = {"run_id": run_id, "venv": cluster.spec.vllm.venv, "lines": 200, "why": why}
    began = time.monotonic()
    answers = cluster.each(lambda agent: agent.ask(remote.stacks_call(agent.dir, request), captured))
    nodes: dict[str, Any] = {}
    texts: dict[str, dict[str, str]] = {}
    for name, answer in answers.items():
        if isinstance(answer, SparkLaunchError):
            nodes[name] = {"error": answer.message}
            continue
        found = {k: answer.get(k) for k in ("py_spy", "hint", "ptrace", "processes", "python_pids")}
        found["files_on_node"] = answer.get("files", {})
        said = {k: redact(v, secrets.values()) for k, v in (answer.get("texts") or {}).items()}
        found["texts"] = said
        nodes[name] = found
        texts[name] = said
    kept = _keep(cluster.spec.name, run_id, texts)
    for name, found in nodes.items():
        found["files"] = kept.get(name, [])
    files = [f for name in sorted(kept) for f in kept[name]]
    entry = {"time": now(), "why": why, "seconds": round(time.monotonic() - began, 2), "nodes": nodes}
    return Evidence(entry, run_id, tuple(files))


def _keep(cluster: str, run_id: str | None, texts: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """Each node's texts as files `NODE-NAME` beside the run's receipt here (the node's name for
    a text flattened to one plain part); their paths, by node."""
    folder = inside(runs_dir(cluster), run_id or "unknown", "evidence", time.strftime("%Y%m%dT%H%M%S"))
    paths: dict[str, list[str]] = {}
    for node, said in sorted(texts.items()):
        for name, text in sorted(said.items()):
            path = inside(folder, flat_name(f"{node}-{name}"))
            write_private(path, text)
            paths.setdefault(node, []).append(str(path))
    return paths
