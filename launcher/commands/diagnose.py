"""`spark-launch diagnose`: everything a bug report needs, in one file, secrets taken out.

The spec as written and its plan, `check --json`, `status` (with the watchdog), and from
every node (launcher/node/scripts/gather.py): the recent run logs, state, `nvidia-smi -q`,
interfaces, routes and RDMA devices, the kernel log's tail, kernel, driver, vLLM and torch
versions, memory and the engine environment. Secret values are replaced on the node (as
our processes hold them) and again here (as this environment holds them), along with
anything that looks like one (`core.redact`).
"""

from __future__ import annotations

import io
import json
import os
import platform
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from launcher.commands.check import run_check
from launcher.commands.receipts import bundle_files
from launcher.commands.reporter import Reporter
from launcher.commands.status import status
from launcher.core import remote
from launcher.core.redact import redact
from launcher.core.reports import check_json, check_text, status_text
from launcher.core.views import plan_json, plan_text
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster, Reached


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
    reporter.info(f"gathering from {len(cluster.names)} node(s)")
    request = {"lines": lines, "venv": cluster.reach.venv, "secrets": list(cluster.reach.secrets)}
    answers = cluster.each(lambda agent: agent.ask(remote.gather_call(agent.dir, request)))
    for name, answer in answers.items():
        if isinstance(answer, SparkLaunchError):
            files[f"nodes/{name}/error.txt"] = answer.render()
            continue
        files.update({f"nodes/{name}/{path}": text for path, text in answer["files"].items()})
    values = [*secret_values.values(), *(os.environ[n] for n in cluster.reach.secrets if os.environ.get(n))]
    return {path: redact(text, values) for path, text in files.items()}


def write_bundle(files: dict[str, str], out: str, top: str) -> int:
    """A gzipped tar of `files` under folder `top`, mode 0600; its size in bytes."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for path, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
            tar.addfile(info, io.BytesIO(data))
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
