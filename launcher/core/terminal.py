"""Text for a terminal: lines wrapped to its width, failures marked. Pure: the CLI measures the
terminal and says whether it is one; piped output stays unwrapped and unmarked, for scripts."""

from __future__ import annotations

from dataclasses import dataclass

STYLES = {"fail": "1;31", "warn": "33", "ok": "32", "dim": "2"}


@dataclass(frozen=True, slots=True)
class Screen:
    """Where text goes: its width in columns (None: as wide as it needs), and whether to mark it."""

    width: int | None = None
    color: bool = False

    def fit(self, lead: str, text: str, indent: int) -> list[str]:
        """`lead` + `text`, the text wrapped at spaces to the width, continuations indented `indent`."""
        if self.width is None or len(lead) + len(text) <= self.width:
            return [lead + text]
        import textwrap  # on a terminal only: piped output, the usual `plan`, is never wrapped

        return textwrap.wrap(
            text,
            max(self.width, indent + 20),
            initial_indent=lead,
            subsequent_indent=" " * indent,
            break_long_words=False,
            break_on_hyphens=False,  # flags and paths hold hyphens: never split one
        ) or [lead]

    def paint(self, text: str, style: str) -> str:
        """`text` in the style (fail, warn, ok, dim) on a terminal; unchanged elsewhere."""
        return f"\x1b[{STYLES[style]}m{text}\x1b[0m" if self.color else text


PLAIN = Screen()
