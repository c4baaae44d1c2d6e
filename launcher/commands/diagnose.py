"""`spark-launch diagnose`: everything a bug report needs, in one file, secrets taken out.

The spec as written and its plan, `check --json`, `status` (with the watchdog), and from
every node (launcher/node/scripts/gather.py): the recent run logs, state, `nvidia-smi -q`,
interfaces, routes and RDMA devices, the kernel log's tail, kernel, driver, vLLM and torch
versions, memory and the engine environment. Secret values are replaced on the node (as
our processes hold them) and again here (as this environment holds them), along with
anything that looks like one (`core.redact`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from launcher.core import remote
from launcher.core.answers.probe_answer import gathered
from launcher.core.redact import redact
from launcher.core.reports import check_json, check_text, status_text
from launcher.core.views import plan_json, plan_text
from launcher.errors import SparkLaunchError, one_line
from launcher.node.cluster import Cluster, Reached
from launcher.operations.gate import run_check
from launcher.operations.receipt_store import bundle_files
from launcher.operations.reporter import Reporter
from launcher.operations.running.cluster_status import status

# A member name a node may choose: up to three plain parts (logs/RUN.log), nothing that climbs out.
MEMBER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,120}){0,2}\Z")


def collect(
    cluster: Reached,
    spec_path: str,
    secret_values: dict[str, str],
    reporter: Reporter,
    lines: int = 300,
    version: str = "?",
    spec_problems: str | None = None,
) -> dict[str, str]:
    """Every file of the bundle by its path inside it, secrets already replaced.

    A cluster without a plan (`spec_problems`: why the spec does not plan) gets those problems
    instead of the plan and the check.
    """
    files: dict[str, str] = {
        "spec.yaml": Path(spec_path).read_text(errors="replace"),
        "launcher.json": json.dumps(_launcher(version), indent=2),
        **bundle_files(cluster.name),  # the last runs' receipts, with any stacks captured
    }
    if isinstance(cluster, Cluster):
        files.update({"plan.txt": plan_text(cluster.plan), "plan.json": plan_json(cluster.plan)})
        reporter.info("check (cached probe answers where they hold)")
        files.update(_attempt("check", lambda: _check(cluster)))
    if spec_problems is not None:
        files["spec-problems.txt"] = spec_problems
    reporter.info("status, with the watchdog")
    files.update(_attempt("status", lambda: _status(cluster)))
    asked = [n for n in cluster.names if n not in cluster.unreachable]
    reporter.info(f"gathering from {len(asked)} node(s)" if asked else "no node answered: nothing to gather")
    request = {"lines": lines, "venv": cluster.reach.venv, "secrets": list(cluster.reach.secrets)}
    answers = cluster.each(lambda agent: agent.ask(remote.gather_call(agent.dir, request), gathered))
    for name, answer in answers.items():
        if isinstance(answer, SparkLaunchError):
            files[f"nodes/{name}/error.txt"] = answer.render()
            continue
        files.update(node_files(name, answer))
    values = [*secret_values.values(), *(os.environ[n] for n in cluster.reach.secrets if os.environ.get(n))]
    return {path: redact(text, values) for path, text in files.items()}


def node_files(node: str, found: dict[str, str]) -> dict[str, str]:
    """A node's files under names we choose: the node's own name for a file only when it is a
    plain relative name (no '..', no leading '/' or '.', no odd character), else `unnamed-N.txt`
    saying what the node called it."""
    out = {}
    for index, (name, text) in enumerate(sorted(found.items())):
        if MEMBER.match(name):
            out[f"nodes/{node}/{name}"] = str(text)
        else:
            out[f"nodes/{node}/unnamed-{index}.txt"] = (
                f"(the node called this file {one_line(name)!r})\n{text}"
            )
    return out


def write_bundle(files: dict[str, str], out: str, top: str) -> int:
    """A gzipped tar of `files` under folder `top`; its size in bytes. It is written to a new
    file of mode 0600 that then takes the place of `out` (whatever mode, owner or link was there)."""
    fd, tmp = tempfile.mkstemp(
        dir=os.path.dirname(os.path.abspath(out)), prefix=".spark-launch-", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            for path, text in sorted(files.items()):
                data = text.encode()
                info = tarfile.TarInfo(f"{top}/{path}")
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return os.path.getsize(out)


def _attempt(name: str, task: Any) -> dict[str, str]:
    """A part of the bundle, or the error that stopped it (the rest is still worth having)."""
    try:
        result: dict[str, str] = task()
        return result
    except SparkLaunchError as exc:
        return {f"{name}-error.txt": exc.render()}


def _check(cluster: Cluster) -> dict[str, str]:
    report = run_check(cluster)
    return {"check.json": check_json(report), "check.txt": check_text(report)}


def _status(cluster: Reached) -> dict[str, str]:
    found = status(cluster, deadline=10)
    return {
        "status.json": json.dumps(found.as_dict(), indent=2),
        "status.txt": status_text(found, time.time()),
    }


def _launcher(version: str) -> dict[str, Any]:
    return {
        "spark_launch": version,
        "python": sys.version,
        "platform": platform.platform(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv,
    }
