"""Reaching a running cluster from any spec (down, status, logs, diagnose): planned offline
when the spec plans, else only each deployment's name and nodes, from what the nodes' state
says runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from launcher.cli.shared import api_key_for, echo, endpoint_key, reach_nodes, ssh_executor
from launcher.errors import SparkLaunchError, SpecError

if TYPE_CHECKING:  # the node side (and fabric) is imported only by commands that reach nodes
    from launcher.core.fleet_plan import Fleet
    from launcher.core.spec.yamlsource import Document
    from launcher.node.cluster import Reached
    from launcher.operations.fleet import Reachable


@contextmanager
def reach_deployments(
    spec_path: str, ssh_config: str | None, deployment: str | None, reach: bool = True
) -> Iterator[Reachable]:
    """Every chosen deployment as far as the spec allows, and SSH onto its nodes, closed after
    (down, status, logs): planned offline when the spec plans; else only each deployment's
    name and nodes, the spec's problems printed as a warning (what runs is what the nodes'
    state says). Only a spec whose name or nodes cannot be read is refused."""
    from launcher.load import judge, read_document
    from launcher.operations.fleet import Deployments

    document = read_document(spec_path)  # a file that is not YAML names no nodes: refused here
    try:
        judgement = judge(spec_path, ssh_config, document=document)
        fleet, problems = judgement.fleet, judgement.pending
    except SpecError as exc:
        fleet, problems = None, exc
    if fleet is None:
        assert problems is not None
        chosen, config = _unplanned(document, problems, spec_path, ssh_config, deployment)
    else:
        chosen, config = _planned(fleet, judgement.ssh_config, deployment)
    executor = next(iter(chosen.clusters.values())).executor
    try:
        unreachable = reach_nodes(executor, _all_nodes(chosen), config, reach)  # type: ignore[arg-type]
        others = chosen.every.values() if isinstance(chosen, Deployments) else ()  # routed to
        for cluster in [*chosen.clusters.values(), *others]:
            cluster.unreachable = {n: e for n, e in unreachable.items() if n in cluster.names}
        yield chosen
    finally:
        executor.close()


def _all_nodes(chosen: Reachable) -> list[str]:
    return list(dict.fromkeys(n for c in chosen.clusters.values() for n in c.names))


def _planned(fleet: Fleet, config: str | None, deployment: str | None) -> tuple[Reachable, str | None]:
    from launcher.node.cluster import Cluster
    from launcher.operations.fleet import Deployments
    from launcher.operations.running.endpoint import Endpoint

    picked = fleet.select(deployment)
    first = fleet.deployments[0].spec
    nodes = {n.name: n.ssh for d in fleet.deployments for n in d.spec.nodes}
    if fleet.endpoint is not None:
        nodes[fleet.endpoint.node.name] = fleet.endpoint.node.ssh
    executor, api_key = ssh_executor(nodes, config), api_key_for(first.secrets)
    every = {d.name: Cluster(d.spec, d.plan, executor, api_key) for d in fleet.deployments}
    clusters = {d.name: every[d.name] for d in picked}
    endpoint = Endpoint(fleet.endpoint, executor, endpoint_key(fleet.endpoint)) if fleet.endpoint else None
    return Deployments(fleet, clusters, endpoint, deployment is None, every), config


def _unplanned(
    document: Document, exc: SpecError, spec_path: str, ssh_config: str | None, deployment: str | None
) -> tuple[Reachable, str | None]:
    from launcher.core.spec.reach import deployment_reaches
    from launcher.load import ssh_config_path
    from launcher.node.cluster import Reached
    from launcher.operations.fleet import Unplanned

    found, multi, broken = deployment_reaches(document.data)
    if found is None:
        raise document.error(broken) from None
    if any(p.path[:1] == ("ssh_config",) for p in exc.problems):  # no node can be reached without it
        raise exc
    echo(f"warning: {exc.render()}\n  the spec does not plan: working from what the nodes run", err=True)
    if deployment is not None and deployment not in found:
        raise SparkLaunchError(
            f"no deployment named {deployment!r}", f"deployments: {', '.join(found)}"
        ) from None
    first = next(iter(found.values()))
    picked = {deployment: found[deployment]} if deployment else found
    config = ssh_config_path(spec_path, ssh_config, first.ssh_config)
    executor = ssh_executor({n.name: n.ssh for r in found.values() for n in r.nodes}, config)
    reached = {n: Reached(r, executor, api_key_for(r.secrets)) for n, r in picked.items()}
    return Unplanned(first.name.split("/")[0], multi, dict(reached), deployment is None, exc), config


@contextmanager
def reach_cluster(
    spec_path: str, ssh_config: str | None, deployment: str | None = None
) -> Iterator[tuple[Reached, SpecError | None]]:
    """One deployment's cluster as far as the spec allows (diagnose): planned offline, else its
    name and nodes only, with the spec's problems (printed as a warning, and handed back)."""
    from launcher.operations.fleet import Unplanned

    with reach_deployments(spec_path, ssh_config, deployment) as chosen:
        if len(chosen.clusters) != 1:
            names = ", ".join(c.name.split("/")[-1] for c in chosen.clusters.values())
            raise SparkLaunchError(
                f"{spec_path} holds several deployments ({names})", "pick one with --deployment NAME"
            )
        problems = chosen.problems if isinstance(chosen, Unplanned) else None
        yield next(iter(chosen.clusters.values())), problems
