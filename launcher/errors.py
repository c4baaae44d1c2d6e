"""The one exception family of spark-launch, and the exit codes it maps to."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass


class ExitStatus(enum.IntEnum):
    """Process exit codes; `cli.main` is the only place that maps errors to them."""

    OK = 0
    FAILURE = 1
    BAD_SPEC = 2
    NODES_DISAGREE = 3
    UNREACHABLE = 4
    INTERRUPTED = 130


def one_line(text: str) -> str:
    """`text` with every unprintable character escaped (\\n, \\x1b, \\u202e): one line, shown exactly."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


# The only escape sequences printed as they are: the launcher's own marks (core/terminal.py's
# STYLES and the reset). They change a colour, never hide text, move the cursor or set a title.
OUR_MARKS = re.compile(r"(\x1b\[(?:1;31|33|32|2|0)m)")


def printable(text: str) -> str:
    """`text` for a terminal: lines, tabs and the launcher's own colour marks kept, every other
    control or unprintable character escaped (a node's log or error may hold escape sequences)."""
    if text.isprintable():
        return text
    parts = OUR_MARKS.split(text)  # odd items: our marks
    return "".join(part if i % 2 else _escaped(part) for i, part in enumerate(parts))


def _escaped(text: str) -> str:
    return "\n".join("\t".join(one_line(part) for part in line.split("\t")) for line in text.split("\n"))


class SparkLaunchError(Exception):
    """Base of every error a user may see: a message, a hint, an exit status."""

    exit_status = ExitStatus.FAILURE
    # Shown as "spark-launch: <message>"; errors that print a located report set this False.
    prefixed = True

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        """The text shown to the user."""
        return self.message + (f"\n  hint: {self.hint}" if self.hint else "")

    @property
    def reason(self) -> str:
        """The message without the subject a per-node context already names (see NodeError)."""
        return self.message

    def render_on(self, width: int | None, color: bool) -> str:
        """The text for a terminal `width` columns wide (None: not a terminal), marked when `color`."""
        return self.render()


class InputError(SparkLaunchError):
    """A file or option given on the command line that cannot be used (exit 2, like a bad spec)."""

    exit_status = ExitStatus.BAD_SPEC


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a spec, located by its key path (e.g. ("serve", "port")).

    `cause`: a key the spec does not understand (unknown, misspelt, misplaced, written twice):
    its value is not used, so other problems may follow from it and it is shown before them.
    """

    path: tuple[str | int, ...]
    message: str
    hint: str | None = None
    cause: bool = False

    @property
    def dotted(self) -> str:
        """The key path as a user writes it: nodes[1].address."""
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out or "(top level)"


class SpecError(SparkLaunchError):
    """A spec that cannot be planned; carries every problem found, each located."""

    exit_status = ExitStatus.BAD_SPEC
    prefixed = False

    def __init__(
        self, filename: str, problems: Sequence[Problem], lines: dict[tuple[str | int, ...], int]
    ) -> None:
        self.filename = filename
        self.problems = tuple(problems)
        self.lines = lines
        super().__init__(f"{filename}: {len(self.problems)} problem(s)")

    def line_of(self, path: tuple[str | int, ...]) -> int:
        """The line of the nearest key on `path` that the file really has."""
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def ordered(self) -> list[Problem]:
        """Cause before consequence: the keys not understood first (a misspelt key before what its
        default then breaks), then the rest; each group by line."""
        return sorted(self.problems, key=lambda p: (not p.cause, self.line_of(p.path)))

    def as_dicts(self) -> list[dict[str, object]]:
        """Every problem as data (`validate --json`), in the order `render` shows them."""
        return [
            {"line": self.line_of(p.path), "path": p.dotted, "message": p.message, "hint": p.hint}
            for p in self.ordered()
        ]

    def render(self) -> str:
        """Every problem as `file:line: key.path: message`, with its hint."""
        # Names, values and YAML's own words may hold newlines or escape bytes: each problem
        # stays one located line, and what a terminal shows is what the file holds.
        out = []
        for p in self.ordered():
            where = f"{one_line(self.filename)}:{self.line_of(p.path)}"
            out.append(f"{where}: {one_line(p.dotted)}: {one_line(p.message)}")
            if p.hint:
                out.append(f"    hint: {one_line(p.hint)}")
        return "\n".join(out)
