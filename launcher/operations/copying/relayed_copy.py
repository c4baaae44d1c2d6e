"""The copy through this machine (`sync models --relay`), for nodes that cannot SSH to each other.

The source runs rsync with its own transfer script as the remote shell; that script passes
rsync's stream to its stdin and stdout, that is to this machine, which starts the receiver
on the target over the target's SSH connection and joins the two streams both ways
(`node.relay.bridge`). The source's progress then comes on stderr.

The receiver is the one the launcher planned (`core.sync.receiver`): when the source asks
for anything else, nothing runs on the target and the copy fails naming the source.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from launcher.core.answers.read import loads
from launcher.core.answers.sync_answer import Progress, RelayAsk, Sent, TransferEvent, transfer_event
from launcher.core.sync.receiver import NotTheReceiver, Receiver, checked
from launcher.node.agent import Agent
from launcher.node.cluster import Cluster
from launcher.node.executor import NodeError, Stream
from launcher.node.output import MAX_STDERR, Drain, TooMuch, lines
from launcher.node.relay import bridge

JOIN_SECONDS = 30


def relayed(
    cluster: Cluster,
    source: str,
    node: str,
    command: str,
    receiver: Receiver,
    on_event: Callable[[Progress], None],
) -> Sent:
    """Run the source's rsync with this machine as its remote shell to the target; how it ended."""
    relay = _Relay(cluster, source, node, receiver, on_event)
    sender = cluster.executor.open(source, command)
    try:
        for line in lines(sender.recv_stderr, MAX_STDERR, sender.close):
            if line.startswith(b"{"):
                relay.take(sender, line)
        relay.join()
    except TooMuch as exc:
        raise NodeError(source, f"its transfer script {exc}") from None
    finally:
        relay.close()
        sender.close()
    return relay.outcome()


class _Relay:
    """One relayed copy: the source's events, the receiver on the target once the source asks."""

    def __init__(
        self,
        cluster: Cluster,
        source: str,
        node: str,
        receiver: Receiver,
        on_event: Callable[[Progress], None],
    ) -> None:
        self.cluster, self.source, self.node = cluster, source, node
        self.receiver, self.on_event = receiver, on_event
        self.agent: Agent = cluster.agents[source]
        self.target: Stream | None = None
        self.said: Drain | None = None  # what the receiver writes on stderr
        self.threads: list[threading.Thread] = []
        self.sent: Sent | None = None

    def take(self, sender: Stream, line: bytes) -> None:
        """One JSON line of the source's transfer script (from its stderr)."""
        event: TransferEvent = self._parse(line)
        if isinstance(event, Progress):
            self.on_event(event)
        elif isinstance(event, Sent):
            self.sent = event
        elif self.target is not None:
            raise NodeError(self.source, "asked the relay for a second receiver: refused")
        else:
            self._start(sender, event)

    def _parse(self, line: bytes) -> TransferEvent:
        with self.agent.reading("the transfer script"):
            return transfer_event(loads(line))

    def _start(self, sender: Stream, ask: RelayAsk) -> None:
        """The planned receiver on the target, joined to the source, if that is what the source asked."""
        try:
            command = checked(self.receiver, ask.command)
        except NotTheReceiver as exc:
            raise NodeError(
                self.source,
                f"asked the relay to run something else than the planned rsync receiver on {self.node}: "
                f"{exc}; nothing was run on {self.node}",
                f"{self.source} (the copy's source) may be compromised: look at its rsync and python3",
            ) from None
        self.target = self.cluster.executor.open(self.node, command)
        self.said = Drain(self.target.recv_stderr, MAX_STDERR, "stderr", self.target.close, patient=False)
        self.threads = bridge(sender, self.target)

    def join(self) -> None:
        """Let both directions finish."""
        for thread in self.threads:
            thread.join(JOIN_SECONDS)

    def close(self) -> None:
        """Close the receiver's stream, if one was started."""
        if self.target is not None:
            self.target.close()

    def outcome(self) -> Sent:
        """How the source's rsync ended, with what the receiver said when it failed."""
        sent = self.sent or Sent(False, None, "the transfer script ended without saying how")
        said = self._said()
        if said and not sent.ok:
            return Sent(
                sent.ok, sent.exit, f"{sent.error} / {self.node}: {' / '.join(said[-2:])}", sent.seconds
            )
        return sent

    def _said(self) -> list[str]:
        if self.said is None:
            return []
        try:
            return self.said.wait(5).decode(errors="replace").splitlines()
        except (TooMuch, OSError, EOFError, TimeoutError):
            return []
