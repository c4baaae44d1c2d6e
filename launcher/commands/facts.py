"""`spark-launch facts`: what `init` learns from each node, raw, for scripts and bug reports.

One SSH call per node, all at once: the discover script reports the interfaces (with
addresses, speed and the RDMA devices behind them), GPUs and memory, the vLLM install and
the model (or the models found).
"""

from __future__ import annotations

from launcher.core.answers.discover_answer import Discovered
from launcher.core.init.draft import InitRequest, discover_request
from launcher.errors import SparkLaunchError
from launcher.node.executor import Executor
from launcher.operations.gathering.discovering import agents, gather

__all__ = ["facts"]


def facts(executor: Executor, request: InitRequest) -> dict[str, Discovered | SparkLaunchError]:
    """Every host's discover answer, or the error reaching it, asked at once."""
    return gather(agents(executor, request.names), discover_request(request))
