"""Every TCP connection vLLM opens between nodes, in the direction it opens it, and what the
collective preflight asks of each node to prove them. Pure.

Read off vLLM 0.32 and 0.33 (the `mp` executor with `--nnodes`), torch's gloo and NCCL:

- rendezvous: every worker -> the head's master port (torch's TCPStore on rank 0;
  `vllm/distributed/parallel_state.py` init_distributed_environment: with nnodes > 1 the init
  method is tcp://master_addr:master_port). Proven on that very port by the network row
  "<head>:<port> reachable" (`operations/gate.py`), so it is not repeated here.
- message queue, the scheduler's output: every worker -> the head. The head's executor binds it
  (`vllm/v1/executor/multiproc_executor.py` MultiprocExecutor._init_executor: `MessageQueue(...,
  connect_ip=get_ip())`; `vllm/distributed/device_communicators/shm_broadcast.py`
  MessageQueue.__init__: `remote_socket.bind(f"tcp://{connect_ip}:0")`, a random port on the
  head's VLLM_HOST_IP), each worker's WorkerProc._init_message_queues connects to it
  (create_mq_broadcaster -> MessageQueue.create_from_handle -> `remote_socket.connect`). The
  tensor-parallel group's broadcaster (GroupCoordinator.create_mq_broadcaster, writer rank 0)
  goes the same way.
- message queue, each worker's output: the head -> every worker. WorkerProc._init_message_queues
  calls create_single_reader_mq_broadcasters(reader_rank_in_group=0): every rank writes its
  own queue, bound on its own VLLM_HOST_IP at a random port, and rank 0's side (on the head)
  connects into it. A worker that refuses inbound connections passes the rendezvous and hangs
  vLLM here, at the KV-cache stage.
- gloo (the CPU process groups, `torch.distributed.new_group(backend="gloo")` in
  GroupCoordinator): one connection per pair, opened by the side whose address compares
  greater (gloo `transport/tcp/device.cc` Device::isInitiator: the address bytes, then the
  port); the other side listens on its GLOO_SOCKET_IFNAME address. A plain gloo all-reduce
  therefore proves one direction per pair only.
- NCCL (GPU nodes): the bootstrap root runs on rank 0; every rank connects to it and the root
  connects back to every rank (`src/bootstrap.cc` bootstrapRoot, rootSend), then each rank
  connects to the next in the ring.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from launcher.core.plan import Plan
from launcher.core.render import NodeCommand


@dataclass(frozen=True, slots=True)
class Connection:
    """A TCP connection vLLM opens from `source` into `target` (a random port there), and why."""

    source: str
    target: str
    uses: tuple[str, ...]


# What each node's preflight may take, all in; gloo alone retries a blocked connect for about
# five times its timeout, so the preflight keeps a deadline of its own.
DEADLINE_SECONDS = 40.0
CONNECT_SECONDS = 3.0  # one TCP connection to a peer's listener
GROUP_SECONDS = 10.0  # the process group's timeout (store waits, gloo's connect)
# Sizes of the all-reduce that measures bandwidth: a CPU node's gloo moves less.
SIZES = {"gloo": 16 << 20, "nccl": 256 << 20}
LATENCY_ROUNDS = 20
BANDWIDTH_ROUNDS = 5


def vllm_connections(plan: Plan, nccl: bool) -> tuple[Connection, ...]:
    """Each (source, target) pair vLLM connects, once, with everything it opens that way."""
    uses: dict[tuple[str, str], list[str]] = {}

    def add(source: NodeCommand, target: NodeCommand, what: str) -> None:
        uses.setdefault((source.name, target.name), []).append(what)

    head, workers = plan.nodes[0], plan.nodes[1:]
    for worker in workers:
        add(worker, head, "scheduler queue")
        add(head, worker, "worker queue")
    for i, one in enumerate(plan.nodes):
        for other in plan.nodes[i + 1 :]:
            high, low = (one, other) if _key(one.address) > _key(other.address) else (other, one)
            add(high, low, "gloo")
    if nccl:
        for worker in workers:
            add(worker, head, "nccl bootstrap")
            add(head, worker, "nccl bootstrap")
        for i, node in enumerate(plan.nodes):
            if len(plan.nodes) > 1:
                add(node, plan.nodes[(i + 1) % len(plan.nodes)], "nccl ring")
    return tuple(Connection(s, t, tuple(dict.fromkeys(w))) for (s, t), w in uses.items())


def _key(address: str) -> tuple[int, bytes]:
    """How gloo orders two addresses: by their bytes (an address that is no IP sorts by its text)."""
    try:
        packed = ipaddress.ip_address(address).packed
    except ValueError:
        return (0, address.encode())
    return (1, packed)


def preflight_requests(plan: Plan, backend: str, port: int) -> dict[str, dict[str, Any]]:
    """What each node's preflight script gets: its rank, the nodes, whom to connect to, the sizes.

    `port` is the head's store: a port of its own, found free on the head just before.
    """
    names = [n.name for n in plan.nodes]
    targets: dict[str, list[int]] = {n: [] for n in names}
    for c in vllm_connections(plan, nccl=backend == "nccl"):
        targets[c.source].append(names.index(c.target))
    backends = ["gloo", "nccl"] if backend == "nccl" else ["gloo"]
    return {
        node.name: {
            "rank": rank,
            "nodes": [{"name": n.name, "address": n.address} for n in plan.nodes],
            "master": plan.nodes[0].address,
            "port": port,
            "connect": sorted(targets[node.name]),
            "backends": backends,
            "deadline": DEADLINE_SECONDS,
            "connect_timeout": CONNECT_SECONDS,
            "group_timeout": GROUP_SECONDS,
            "bytes": {b: SIZES[b] for b in backends},
            "rounds": [LATENCY_ROUNDS, BANDWIDTH_ROUNDS],
        }
        for rank, node in enumerate(plan.nodes)
    }
