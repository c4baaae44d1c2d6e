"""What `init` and `facts` learn from each host before there is a spec: the discover script, asked
of every host at once.

One SSH call per node, all at once: the discover script reports the interfaces (with
addresses, speed and the RDMA devices behind them), GPUs and memory, the vLLM install and
the model (or the models found).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core import remote
from launcher.core.answers.discover_answer import Discovered, discovered
from launcher.errors import ExitStatus, SparkLaunchError
from launcher.node.agent import Agent
from launcher.node.executor import Executor, fan_out

__all__ = ["HostsUnreachable", "agents", "all_facts", "gather"]

# Discovery writes nothing on the nodes; the run directory only names the job in `ps`.
CLUSTER = "init"


class HostsUnreachable(SparkLaunchError):
    """One or more hosts could not be asked: nothing is written."""

    exit_status = ExitStatus.UNREACHABLE

    def __init__(self, errors: Mapping[str, SparkLaunchError]) -> None:
        lines = [error.render().replace("\n", "\n  ") for error in errors.values()]
        super().__init__(
            "cannot ask every host, so no spec was written:\n  " + "\n  ".join(lines),
            "fix SSH to those hosts (ssh HOST true must work without a prompt), then run it again",
        )
        self.errors = dict(errors)


def agents(executor: Executor, names: tuple[str, ...]) -> dict[str, Agent]:
    """One agent per node name."""
    return {name: Agent(executor, CLUSTER, name) for name in names}


def gather(by_name: Mapping[str, Agent], request: dict[str, Any]) -> dict[str, Discovered | SparkLaunchError]:
    """Every node's discover answer (or the error reaching it), asked in parallel."""

    def ask(name: str) -> Discovered:
        return by_name[name].ask(remote.discover_call(by_name[name].dir, request), discovered)

    return fan_out(by_name, ask)


def all_facts(by_name: Mapping[str, Agent], request: dict[str, Any]) -> dict[str, Discovered]:
    """Every node's facts; HostsUnreachable naming each node that could not be asked."""
    answers = gather(by_name, request)
    errors = {n: a for n, a in answers.items() if isinstance(a, SparkLaunchError)}
    if errors:
        raise HostsUnreachable(errors)
    return {n: a for n, a in answers.items() if not isinstance(a, SparkLaunchError)}
