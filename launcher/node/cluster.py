"""A cluster's nodes and their agents (Reached), and a planned one (Cluster): the shared handle
of every cluster operation."""

from __future__ import annotations

import contextlib
import json
import secrets as pysecrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from launcher.core.answers.run_answer import NodeState
from launcher.core.plan import Plan
from launcher.core.render import NodeCommand
from launcher.core.spec.reach import Reach
from launcher.core.spec.sections import Spec
from launcher.core.vllm.sources import Sources
from launcher.errors import ExitStatus, SparkLaunchError
from launcher.node.agent import Agent
from launcher.node.executor import Executor, NodeError, fan_out
from launcher.node.locking import ClusterBusy, busy, holder_is_stale, lock_holder

__all__ = ["Cluster", "ClusterBusy", "Hold", "Reached", "Unreachable", "new_run_id"]
T = TypeVar("T")


class Unreachable(SparkLaunchError):
    """Nodes that cannot be reached: every one named, with its reason and fix."""

    exit_status = ExitStatus.UNREACHABLE

    def __init__(self, errors: dict[str, SparkLaunchError], total: int, consequence: str) -> None:
        super().__init__(
            f"cannot reach {len(errors)} of {total} node(s) ({', '.join(errors)}): {consequence}"
        )
        self.errors = errors

    def render(self) -> str:
        """The verdict, then each node's reason and hint."""
        lines = [self.message]
        for name, error in self.errors.items():
            lines.append(f"  {name}: {error.reason}")
            lines += [f"    hint: {error.hint}"] if error.hint else []
        return "\n".join(lines)


class Hold:
    """The cluster's lock as this launcher holds it, and what rides on the calls that take and
    release it: what runs on the head, read in the call that took it (when asked for), and a
    file for the head (the run's receipt) that waits for the next call there that carries one
    (the head's start, else the release), instead of costing a call of its own."""

    def __init__(self, state: NodeState | None = None) -> None:
        self.state = state
        self._parcel: tuple[str, str] | None = None
        self._guard = threading.Lock()

    def leave(self, path: str, text: str) -> None:
        """Have the head keep `text` at `path` (under its home), replacing what waited before."""
        with self._guard:
            self._parcel = (path, text)

    def parcel(self) -> tuple[str, str] | None:
        """The file waiting for the head (path, text), for the call that carries it; None after."""
        with self._guard:
            parcel, self._parcel = self._parcel, None
            return parcel


class Reached:
    """A cluster's nodes, one agent each over one executor: what stopping and inspecting a
    running cluster need. No plan: the nodes' own state says what runs."""

    plan: Plan | None = None

    def __init__(
        self,
        reach: Reach,
        executor: Executor,
        api_key: str | None = None,
        endpoint: tuple[str, int] | None = None,
    ) -> None:
        self.reach = reach
        self.executor = executor
        self.api_key = api_key  # VLLM_API_KEY's value when the spec lists it as a secret
        self.endpoint = endpoint  # the head's API (host as seen on the head, port), when known
        self.agents = {n.name: Agent(executor, reach.name, n.name) for n in reach.nodes}
        # Nodes found unreachable when the command began (they are not tried again).
        self.unreachable: dict[str, NodeError] = {}
        self._unreleased: set[str] = set()  # tokens of locks taken here whose release failed

    @property
    def name(self) -> str:
        """The cluster's name."""
        return self.reach.name

    @property
    def names(self) -> list[str]:
        """Node names, rank order."""
        return [n.name for n in self.reach.nodes]

    @property
    def head_name(self) -> str:
        """Rank 0's name."""
        return self.names[0]

    def require_all(self, consequence: str) -> None:
        """Unreachable, naming every node that cannot be reached, unless all can."""
        if self.unreachable:
            raise Unreachable(dict(self.unreachable), len(self.names), consequence)

    def each(self, task: Callable[[Agent], T], finish: bool = False) -> dict[str, T | SparkLaunchError]:
        """Run an agent call on every node at once (`finish`: on Ctrl-C, let the calls under way end)."""
        return fan_out(self.names, lambda name: task(self.agents[name]), finish)

    def http(
        self, method: str, path: str, body: bytes | None = None, timeout: float = 10.0
    ) -> tuple[int, bytes]:
        """An HTTP request to the head's API, through its SSH connection."""
        if self.endpoint is None:
            raise NodeError(self.head_name, "where the head's API listens is not known (nothing runs there)")
        host, port = self.endpoint
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        response = self.executor.http(self.head_name, port, method, path, body, timeout, host, headers)
        return response.status, response.body

    def served_model(self, timeout: float = 10.0) -> dict[str, Any]:
        """The model entry of the head's /v1/models; a NodeError when there is none to read."""
        status, body = self.http("GET", "/v1/models", timeout=timeout)
        try:
            entry = json.loads(body)["data"][0] if status == 200 else None
        except (ValueError, KeyError, IndexError, TypeError):
            entry = None
        if not isinstance(entry, dict) or "id" not in entry:
            raise NodeError(self.head_name, f"GET /v1/models answered {status} without a model")
        return entry

    @contextlib.contextmanager
    def locked(self, command: str, run_id: str | None = None, status: bool = False) -> Iterator[Hold]:
        """Hold the cluster's lock (on the head) for the duration; ClusterBusy when another holds it.

        A stale lock (its owner on this machine provably gone) is broken, and so is a lock this
        very object took and could not release (the head was lost meanwhile, as when `supervise`
        restarts a cluster): both in one atomic step on the head, naming the holder found.
        With `status`, the Hold says what runs on the head (read in the call that took the
        lock); a file left with it is kept on the head by the release at the latest.
        """
        holder = lock_holder(command, run_id)
        agent = self.agents[self.head_name]
        answer = agent.lock(holder, status=status)
        other = answer.holder
        if not answer.ok and (other.token in self._unreleased or holder_is_stale(other.as_dict())):
            answer = agent.lock(holder, stale=str(other.token), status=status)
        if not answer.ok:
            raise busy(self.name, self.head_name, answer.holder.as_dict())
        hold = Hold(answer.state)
        try:
            yield hold
        finally:
            # Never hide why the operation ended; a lock this object could not release is
            # its own to take over next time.
            try:
                agent.unlock(holder["token"], hold.parcel())
            except SparkLaunchError:
                self._unreleased.add(holder["token"])


class Cluster(Reached):
    """The spec, its plan, and one agent per node over one executor: the handle of every
    operation that plans (`sources`: where the plan's inputs came from, when read for it)."""

    def __init__(
        self,
        spec: Spec,
        plan: Plan,
        executor: Executor,
        api_key: str | None = None,
        sources: Sources | None = None,
    ) -> None:
        super().__init__(Reach.of(spec), executor, api_key, (plan.api_host, plan.api_port))
        self.spec = spec
        self.plan: Plan = plan
        self.sources = sources

    @property
    def head(self) -> NodeCommand:
        """Rank 0."""
        return self.plan.nodes[0]

    @property
    def api_host(self) -> str:
        """Where the head's API listens, as seen from the head itself."""
        return self.plan.api_host


def new_run_id() -> str:
    """A sortable, unique id for one start of the cluster (names the log files)."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + pysecrets.token_hex(2)
