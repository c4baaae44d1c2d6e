"""A TCP listener on a node (`net listen`), for `check` and `init` to connect to from the others."""

from __future__ import annotations

import threading

from launcher.core.answers.probe_answer import Listening, peers
from launcher.core.remote import Call
from launcher.errors import SparkLaunchError
from launcher.node.agent import Agent


class Listener:
    """`net listen` on its own thread: its first line (listening, or why not), then who came."""

    def __init__(self, agent: Agent, call: Call) -> None:
        self.agent, self.call = agent, call
        self.answered = threading.Event()
        self.listening: Listening | None = None
        self.peers: tuple[str, ...] | None = None
        self.error: str | None = None
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        def parse(raw: object) -> Listening | tuple[str, ...]:
            return Listening.parse(raw) if self.listening is None else peers(raw)

        def on_event(event: Listening | tuple[str, ...]) -> None:
            if isinstance(event, Listening):
                self.listening = event
                self.answered.set()
            else:
                self.peers = event

        try:
            self.agent.events(self.call, parse, on_event)
        except SparkLaunchError as exc:  # unreachable, or a malformed line
            self.error = exc.message
        self.answered.set()

    def first(self, seconds: float) -> Listening:
        """Its first line within `seconds`: the port it listens on, or why it does not."""
        if not self.answered.wait(seconds):
            return Listening(None, "timed out")
        return self.listening or Listening(None, self.error or "no answer")

    def join(self, seconds: float) -> tuple[str, ...] | None:
        """Wait for it to end; the addresses that connected (None when its last line did not come)."""
        self.thread.join(seconds)
        return self.peers
