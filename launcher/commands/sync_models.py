"""`spark-launch sync models`: every node's model directories made identical to the source's, by content.

1. Every node reports its manifest at once (sha256 of each file; unchanged files come
   from the cache beside the model, so an up-to-date node answers in seconds).
2. The source must hold a complete model. For each target: what it lacks, and whether it
   has the room and the write permission for it. Anything wrong refuses that node before a
   single byte is copied. A dry run also asks whether the source reaches each target over
   SSH at its fabric address, then stops.
3. The targets that differ, all at once: make the directory ready, rsync from the source,
   then the target's manifest again, which must equal the source's (one retry). Whether
   the source reaches each target (and finds rsync there) is asked meanwhile, so that it
   costs no time: a copy that fails on a target it cannot reach is reported as that, with
   the fix. A target whose directory must first be made or pruned is asked before that.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from launcher.core.answers.sync_answer import Hashing, Reach
from launcher.core.spec.sections import Node
from launcher.core.sync import sync_calls
from launcher.core.sync.model_manifest import (
    REFUSED_HINT,
    Manifest,
    human,
    missing_parts,
    model_dirs,
    needs_weights,
    refusals,
)
from launcher.core.sync.sync_report import DirPlan, NodeOutcome, SourceModel, SyncResult
from launcher.core.sync.transfer_plan import DEFAULT_RSH, plan_transfer, remote_host, room_problems
from launcher.errors import SparkLaunchError
from launcher.node.cluster import Cluster, Unreachable
from launcher.node.executor import Background, NodeError, fan_out
from launcher.operations.copying.model_copy import copy_all
from launcher.operations.copying.sync_options import SyncOptions, SyncReporter

Manifests = dict[str, Manifest]  # by directory label


class SourceIncomplete(SparkLaunchError):
    """The source does not hold a complete model: nothing is copied from it."""


def sync_models(
    cluster: Cluster,
    options: SyncOptions,
    reporter: SyncReporter,
    clock: Callable[[], float] = time.monotonic,
) -> SyncResult:
    """Plan (and unless a dry run, do) the copy to every node that differs from the source."""
    started = clock()
    source = _source(cluster, options.source)
    dirs = model_dirs(cluster.spec)
    answers = _manifests(cluster, dirs, reporter)
    found = answers[source]
    if isinstance(found, NodeError) and found.node == source:  # no source: every node not reached, named
        failed = {n: a for n, a in answers.items() if isinstance(a, NodeError) and a.node == n}
        raise Unreachable(dict(failed), len(cluster.names), f"nothing was copied (the source, {source}, too)")
    if isinstance(found, SparkLaunchError):
        raise found
    _require_complete(cluster, source, found)
    outcomes = [_plan(cluster, n, found, answers[n]) for n in cluster.names if n != source]
    if options.dry_run or not any(o.state == "would copy" for o in outcomes):
        outcomes = outcomes if options.relay else _reach(cluster, source, outcomes)
    else:
        outcomes = _copy(cluster, source, found, outcomes, options, reporter)
    models = tuple(
        SourceModel(
            label,
            m.path,
            len(m.files),
            m.total_bytes,
            m.digest,
            m.hashed_bytes,
            tuple(f"{rel} -> {t}" for rel, t in sorted(m.links.items())),
        )
        for label, m in found.items()
    )
    return SyncResult(source, options.dry_run, options.relay, models, tuple(outcomes), clock() - started)


def _copy(
    cluster: Cluster,
    source: str,
    found: Manifests,
    outcomes: list[NodeOutcome],
    options: SyncOptions,
    reporter: SyncReporter,
) -> list[NodeOutcome]:
    """Copy under the cluster's lock, the source's reach of each target asked meanwhile: before
    the copy starts where a target's directory is made or pruned first (nothing is touched on a
    target the copy cannot reach), else alongside it, explaining a copy that failed."""
    if options.relay:
        with cluster.locked("sync models"):
            return copy_all(cluster, source, found, outcomes, options, reporter)
    readied = any(d.prepare for o in outcomes if o.state == "would copy" for d in o.dirs)
    reached = Background(lambda: _reach(cluster, source, outcomes))
    with cluster.locked("sync models"):
        if readied:
            return copy_all(cluster, source, found, reached.result(), options, reporter)
        copied = copy_all(cluster, source, found, outcomes, options, reporter)
    return [
        r if c.state == "failed" and r.state != "would copy" else c
        for c, r in zip(copied, reached.result(), strict=True)
    ]


def _source(cluster: Cluster, name: str | None) -> str:
    if name is None:
        return cluster.head.name
    if name not in cluster.names:
        raise SparkLaunchError(f"--from {name}: no such node", f"nodes: {', '.join(cluster.names)}")
    return name


def _manifests(
    cluster: Cluster, dirs: list[tuple[str, str]], reporter: SyncReporter
) -> Mapping[str, Manifests | SparkLaunchError]:
    """Every node's manifest of every model directory, all nodes at once."""
    lock, said = threading.Lock(), dict[str, float]()

    def hashing(node: str, path: str, event: Hashing) -> None:
        with lock:
            if time.monotonic() - said.get(node, 0.0) >= 5:  # a first hash of a big model takes a while
                said[node] = time.monotonic()
                reporter.info(f"{node}: hashing {path}: {human(event.done)} of {human(event.total)}")

    def ask(node: str) -> Manifests:
        agent = cluster.agents[node]
        return {label: agent.manifest(path, functools.partial(hashing, node, path)) for label, path in dirs}

    return fan_out(cluster.names, ask)


def _require_complete(cluster: Cluster, source: str, manifests: Manifests) -> None:
    weights = needs_weights(cluster.spec)
    for label, m in manifests.items():
        missing = missing_parts(m, weights)
        if missing:
            raise SourceIncomplete(
                f"the source {source} does not hold a complete {label} in {m.path}: "
                f"missing {'; '.join(missing)}",
                "complete it there (e.g. download it again), or copy from another node: --from NODE",
            )
        refused = refusals(m)
        if refused:
            raise SourceIncomplete(
                f"the source {source}'s {label} in {m.path} holds what is never copied: {'; '.join(refused)}",
                REFUSED_HINT,
            )


def _plan(
    cluster: Cluster, node: str, source: Manifests, answer: Manifests | SparkLaunchError
) -> NodeOutcome:
    """What one target lacks, per directory, and whether the copy can land there."""
    if isinstance(answer, SparkLaunchError):
        return NodeOutcome(node, "unreachable", detail=answer.message, hint=answer.hint, unreachable=True)
    plans = []
    for label, want in source.items():
        have = answer[label]
        block = have.room.block if have.room else 4096
        transfer = plan_transfer(want, have, block)
        problems = tuple(room_problems(node, transfer, have))
        # rsync creates the directory itself when its parent exists: then nothing to prepare
        ready = not transfer.remove and (
            have.exists or (have.room is not None and have.room.at == _parent(want.path))
        )
        plans.append(DirPlan(label, want.path, transfer, problems, prepare=not ready))
    if any(p.problems for p in plans):
        space = any("space" in q for p in plans for q in p.problems)
        hint = (
            "free space there, or put the model on a larger file system (the same path on every node)"
            if space
            else f"on {node}: sudo chown -R $USER PATH (a container often leaves files owned by root)"
        )
        return NodeOutcome(node, "refused", tuple(plans), "refused before copying anything", hint)
    needed = any(p.transfer.needed for p in plans)
    return NodeOutcome(node, "would copy" if needed else "identical", tuple(plans))


def _reach(cluster: Cluster, source: str, outcomes: list[NodeOutcome]) -> list[NodeOutcome]:
    """Can the source's remote shell reach each target to copy, at its fabric address, with rsync there?"""
    agent = cluster.agents[source]
    to_copy = [o.node for o in outcomes if o.state == "would copy"]
    answers = fan_out(
        to_copy,
        lambda n: agent.ask(sync_calls.reach_call(agent.dir, _host(cluster, n), DEFAULT_RSH), Reach.parse),
    )
    out = []
    for o in outcomes:
        answer = answers.get(o.node)
        if answer is None or (isinstance(answer, Reach) and answer.ok):
            out.append(o)
        elif isinstance(answer, SparkLaunchError):
            out.append(replace(o, state="unreachable", detail=answer.message, unreachable=True))
        else:
            out.append(_unreached(cluster, source, o, answer))
    return out


def _unreached(cluster: Cluster, source: str, o: NodeOutcome, answer: Reach) -> NodeOutcome:
    host = _host(cluster, o.node)
    if answer.failed == "rsync":
        return replace(
            o, state="refused", detail=f"{source}: {answer.error}", hint=f"install rsync on {source}"
        )
    if answer.failed == "remote rsync":
        detail = f"{o.node} has no rsync ({answer.error})"
        return replace(o, state="refused", detail=detail, hint=f"install rsync on {o.node}")
    return replace(
        o,
        state="unreachable",
        unreachable=True,
        detail=f"{source} cannot reach {o.node} at {host} over SSH with `{answer.rsh}`: {answer.error}",
        hint=f"give {source} a key for {o.node}'s fabric address: on {source}, `ssh-copy-id {host}` "
        f"(then `ssh {host} true` once to accept its host key); or copy through this machine: --relay",
    )


def _parent(path: str) -> str:
    return path.rstrip("/").rpartition("/")[0] or "/"


def _host(cluster: Cluster, name: str) -> str:
    node: Node = next(n for n in cluster.spec.nodes if n.name == name)
    return remote_host(node.address, node.ssh)
