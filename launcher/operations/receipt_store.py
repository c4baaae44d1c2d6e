"""Receipts of runs, kept on the operator's machine and on the head (what `runs` and `diff` read).

Here: $XDG_STATE_HOME/spark-launch/<cluster>/runs/<run id>.json (~/.local/state/... without
XDG_STATE_HOME), mode 0600, with the evidence files of the run beside it. On the head:
~/.spark-launch/<cluster>/runs/<run id>.json, beside the nodes' run directories. The head's
copy is best effort: a head that cannot be written to never fails a start. A start's receipt
travels to the head with calls `up` sends there anyway (`to_head`: the head's start, the lock's
release), not in calls of its own.

Every path here is made of the launcher's own run ids (`core.answers.read.RUN_ID`) and names
it chose or flattened, and is proven to stay inside the state folder before it is opened.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from launcher.core import remote
from launcher.core.answers.read import is_run_id
from launcher.core.checks import Report
from launcher.core.receipts.content import FORMAT, finished, new_receipt, with_evidence
from launcher.errors import ExitStatus, SparkLaunchError
from launcher.node.cluster import Cluster, new_run_id

ToHead = Callable[[str, str], None]  # (path under the head's home, text): kept there by a later call


class Outcome(Protocol):
    """What a start returns that the receipt records."""

    @property
    def model(self) -> str | None:
        """The model it serves (None: not waited for)."""

    @property
    def message(self) -> str:
        """What it did, in words."""


T = TypeVar("T", bound=Outcome)


def now() -> str:
    """The time, for receipts: ISO 8601 in UTC."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def state_dir() -> Path:
    """spark-launch's state directory on this machine (XDG_STATE_HOME, else ~/.local/state)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "spark-launch"


def runs_dir(cluster: str) -> Path:
    """Where this machine keeps the cluster's receipts."""
    return state_dir() / cluster / "runs"


class OutsideState(SparkLaunchError):
    """A path that would leave the state folder: refused, never opened."""


def inside(base: Path, *parts: str) -> Path:
    """`base/parts...`, proven to stay inside `base` once resolved (no `..`, no absolute part, no
    link leading out); OutsideState otherwise."""
    path = base.joinpath(*parts)
    try:
        top = base.resolve()
        contained = path.resolve().is_relative_to(top) and path.resolve() != top
    except (OSError, ValueError, RuntimeError):  # a loop of links, a NUL
        contained = False
    if not contained:
        raise OutsideState(
            f"refused to use {str(path)[:200]!r}: it is not inside {base}",
            "a name that would leave the state folder came from a node or a changed file",
        )
    return path


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read, atomically (a reader never sees half of it). Text a
    file cannot hold as UTF-8 (a lone surrogate from a node) is written escaped."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write(text)
    os.replace(tmp, path)


def save(cluster: Cluster, receipt: dict[str, Any], to_head: ToHead | None = None) -> None:
    """Keep the receipt here, then on the head (best effort): by a call of its own, or handed
    `to_head` for a later call to carry."""
    text = json.dumps(receipt, indent=2, sort_keys=False) + "\n"
    write_private(inside(runs_dir(cluster.spec.name), f"{receipt['run_id']}.json"), text)
    if to_head is not None:
        to_head(remote.receipt_path(cluster.spec.name, receipt["run_id"]), text)
        return
    with contextlib.suppress(SparkLaunchError):
        call = remote.save_receipt_call(cluster.spec.name, receipt["run_id"], text)
        cluster.agents[cluster.head.name].run(call)


def load_all(cluster: str) -> list[dict[str, Any]]:
    """Every receipt of the cluster kept here, oldest first (run ids sort by time)."""
    found = []
    for path in sorted(runs_dir(cluster).glob("*.json")):
        try:
            receipt = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(receipt, dict) and receipt.get("format") == FORMAT and is_run_id(receipt.get("run_id")):
            found.append(receipt)
    return sorted(found, key=lambda r: str(r.get("run_id")))


class Run:
    """One start's receipt while it is written: the run id, its evidence, its outcome."""

    def __init__(
        self,
        cluster: Cluster,
        receipt: dict[str, Any],
        secrets: dict[str, str],
        to_head: ToHead | None = None,
    ) -> None:
        self.cluster = cluster
        self.receipt = receipt
        self.secrets = secrets
        self.to_head = to_head  # where the head's copy goes (None: a call of its own each time)

    @property
    def run_id(self) -> str:
        """The run's id (it names the nodes' log files)."""
        return str(self.receipt["run_id"])

    def add(self, evidence: dict[str, Any]) -> None:
        """Keep one more piece of evidence in the receipt."""
        self.receipt = with_evidence(self.receipt, evidence)
        save(self.cluster, self.receipt, self.to_head)

    def end(self, outcome: str, detail: str) -> None:
        """Record how the start ended."""
        self.receipt = finished(self.receipt, now(), outcome, detail)
        save(self.cluster, self.receipt, self.to_head)


def record_run(
    cluster: Cluster,
    report: Report | None,
    secrets: dict[str, str],
    start: Callable[[Run], T],
    run_id: str | None = None,
    to_head: ToHead | None = None,
) -> T:
    """Start under a receipt (for run `run_id`, or a new one): written here before the first rank
    starts, its outcome after; the head's copy by calls of its own, or handed `to_head`."""
    facts = report.facts if report is not None else None
    rows = report.rows if report is not None else None
    receipt = new_receipt(cluster.spec, cluster.plan, run_id or new_run_id(), now(), facts, rows)
    run = Run(cluster, receipt, secrets, to_head)
    save(cluster, run.receipt, to_head)
    try:
        result = start(run)
    except KeyboardInterrupt:
        run.end("interrupted", "interrupted")
        raise
    except SparkLaunchError as exc:
        interrupted = exc.exit_status == ExitStatus.INTERRUPTED
        run.end("interrupted" if interrupted else "failed", (exc.message.splitlines() or [""])[0])
        raise
    run.end("served" if result.model else "started", result.message)
    return result


def add_evidence(cluster: Cluster, run_id: str, evidence: dict[str, Any]) -> bool:
    """Add evidence to a kept receipt (a run that served, then died or wedged); False if none is
    kept: `run_id` not one of the launcher's, or no receipt of that run (and cluster) here."""
    if not is_run_id(run_id):
        return False
    try:
        receipt = json.loads(inside(runs_dir(cluster.spec.name), f"{run_id}.json").read_text())
    except (OSError, ValueError, OutsideState):
        return False
    if not isinstance(receipt, dict) or receipt.get("format") != FORMAT or receipt.get("run_id") != run_id:
        return False
    save(cluster, with_evidence(receipt, evidence))
    return True


def bundle_files(cluster: str, last: int = 2) -> dict[str, str]:
    """The last runs' receipts and evidence files kept here, by their path in a diagnose bundle."""
    base = runs_dir(cluster)
    files: dict[str, str] = {}
    for receipt in load_all(cluster)[-last:]:
        run_id = str(receipt["run_id"])
        files[f"receipts/{run_id}.json"] = json.dumps(receipt, indent=2) + "\n"
        folder = inside(base, run_id)
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file() and not path.is_symlink():
                files[f"receipts/{path.relative_to(base)}"] = path.read_text(errors="replace")
    return files
