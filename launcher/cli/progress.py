"""The CLI's Reporter: progress lines, and on a terminal a live block of one line per node.

Ours rather than click.progressbar (one bar, not a line per node) or rich's live display (a
dependency for one block of lines): every line goes through `printable`, since it carries
what the nodes say.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from launcher.errors import printable

UP = "\x1b[{n}F\x1b[J"  # to the start of the line n lines up, then clear to the end of the screen
PLAIN_EVERY = 2.0  # seconds between two lines for the same node when only its progress moved


class Printer:
    """Lines to stderr (stdout stays clean for --json). On a terminal the nodes' stages are one
    block redrawn in place; piped or logged, a plain line per change (progress at most every 2 s)."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.shown: dict[str, str] = {}
        self.printed_at: dict[str, float] = {}
        self.block: list[str] = []

    def info(self, text: str) -> None:
        """A line of progress (above the live block, which is drawn again under it)."""
        block = self.block
        self._erase()
        self._write(text)
        self._draw(block)

    def stages(self, stages: dict[str, str], elapsed: float) -> None:
        """Each node's stage (with its progress): redrawn in place, or a line per change."""
        if self.live:
            width = max(map(len, stages), default=0)
            block = [f"[{elapsed:5.0f}s] {node:<{width}}  {stage}" for node, stage in stages.items()]
            if stages != self.shown or int(elapsed) != int(self.printed_at.get("", -1)):
                self.shown, self.printed_at[""] = dict(stages), elapsed
                self._erase()
                self._draw(block)
            return
        now = time.monotonic()
        for node, stage in stages.items():
            before = self.shown.get(node, "")
            moved = before.split(" (")[0] != stage.split(" (")[0]
            if stage != before and (moved or now - self.printed_at.get(node, 0.0) >= PLAIN_EVERY):
                self.shown[node], self.printed_at[node] = stage, now
                self._write(f"[{elapsed:5.1f}s] {node}: {stage}")

    def _erase(self) -> None:
        if self.block:
            self.stream.write(UP.format(n=len(self.block)))
            self.block = []

    def _draw(self, block: list[str]) -> None:
        for line in block:
            self._write(line)
        self.block = block

    def _write(self, line: str) -> None:
        self.stream.write(printable(line) + "\n")  # node text: escape sequences shown, not obeyed
        self.stream.flush()
