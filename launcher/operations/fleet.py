"""The chosen deployments of a spec file (or the one chosen), and the endpoint, reached: and one
task done for each at once (`each`), with progress lines named by deployment. Each deployment is
a Cluster of its own and goes through exactly what a one-model spec goes through.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from launcher.core.fleet_plan import Fleet
from launcher.core.serving.state import ClusterStatus
from launcher.errors import SparkLaunchError, SpecError
from launcher.node.cluster import Cluster, Reached
from launcher.node.executor import fan_out
from launcher.operations.reporter import Reporter
from launcher.operations.running.cluster_status import status
from launcher.operations.running.endpoint import (
    Endpoint,
)

T = TypeVar("T")
C = TypeVar("C", bound=Reached)


@dataclass
class Deployments:
    """The chosen deployments as Clusters over one executor, and the endpoint (when there is one)."""

    fleet: Fleet
    clusters: dict[str, Cluster]
    endpoint: Endpoint | None
    whole: bool  # every deployment (no --deployment): the endpoint is started and stopped too
    every: dict[str, Cluster] = field(default_factory=dict)  # all of the file's (the endpoint routes them)

    def others(self) -> dict[str, Cluster]:
        """The deployments not chosen (their state decides the endpoint's routes too)."""
        return {n: c for n, c in self.every.items() if n not in self.clusters}

    def running_others(self) -> list[str]:
        """The deployments not chosen that run their plan now (the endpoint keeps routing to
        them): each asked at once."""
        found = each(self.others(), lambda _, c: status(c, deadline=None))
        return [n for n, s in found.items() if isinstance(s, ClusterStatus) and s.state == "running"]

    @property
    def name(self) -> str:
        """The cluster's name."""
        return self.fleet.name

    @property
    def multi(self) -> bool:
        """Written with deployments: (else one deployment, named after the cluster)."""
        return self.fleet.multi


@dataclass
class Unplanned:
    """The chosen deployments of a spec that does not plan: their names and nodes only, over one
    executor. `down`, `status` and `logs` work from what the nodes' own state says runs."""

    name: str
    multi: bool
    clusters: dict[str, Reached]
    whole: bool
    problems: SpecError  # why the spec does not plan
    endpoint: None = None  # an endpoint's router is stopped with a spec that plans


Reachable = Deployments | Unplanned


def each(clusters: dict[str, C], task: Callable[[str, C], T]) -> dict[str, T | SparkLaunchError]:
    """Run `task` for every chosen deployment at once; an error is that deployment's result."""

    names = list(clusters)
    if len(names) == 1:  # in this thread: Ctrl-C reaches it as it reaches a one-model `up`
        try:
            return {names[0]: task(names[0], clusters[names[0]])}
        except SparkLaunchError as exc:
            return {names[0]: exc}
    return fan_out(names, lambda name: task(name, clusters[name]))


class Prefixed:
    """A Reporter whose lines name the deployment."""

    def __init__(self, inner: Reporter, name: str) -> None:
        self.inner, self.name = inner, name

    def info(self, text: str) -> None:
        """A line of progress, prefixed."""
        self.inner.info(f"[{self.name}] {text}")

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Each node's stage, the node named with its deployment."""
        self.inner.stages({f"{self.name}/{n}": s for n, s in stages.items()}, elapsed)


class Board:
    """Several deployments starting at once: one block of every node's stage."""

    def __init__(self, inner: Reporter) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.shown: dict[str, dict[str, str]] = {}

    def reporter(self, name: str) -> Reporter:
        """The Reporter for deployment `name`."""
        board = self

        class One(Prefixed):
            def stages(self, stages: dict[str, str], elapsed: float) -> None:
                with board.lock:
                    board.shown[name] = {f"{name}/{n}": s for n, s in stages.items()}
                    merged = {k: v for d in board.shown.values() for k, v in d.items()}
                    board.inner.stages(merged, elapsed)

            def info(self, text: str) -> None:
                with board.lock:
                    super().info(text)

        return One(self.inner, name)
