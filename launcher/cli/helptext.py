"""`--help`: a command's usage, its docstring and its options (a group's commands), laid out for
the terminal. Imported only when help is asked for.

The docstring's paragraphs are filled to the width; a paragraph whose first line is `\\b` is
kept line by line, as written (examples, tables).
"""

from __future__ import annotations

import shutil
import textwrap

from launcher.cli.commandline import HELP_NAMES, Command, Group

MAX_WIDTH = 100  # wider terminals still get lines a reader can follow
FIRST_COLUMN = 30  # an option's names wider than this put its help on the next line
INDENT = 2


def width() -> int:
    """The width help is laid out to: the terminal's (COLUMNS, else 80 when not a terminal), at most 100."""
    return max(min(shutil.get_terminal_size().columns, MAX_WIDTH) - 2, 50)


def command_help(command: Command, prog: str) -> str:
    """The whole help of `command`, run as `prog`."""
    total = width()
    out = [command.usage(prog)]
    if command.help:
        out += ["", fill(command.help, total - INDENT, " " * INDENT)]
    rows = [o.help_row() for o in command.options] + [(", ".join(HELP_NAMES), "Show this message and exit.")]
    out += ["", "Options:", *table(rows, total)]
    if isinstance(command, Group):
        names = sorted(command.commands)
        limit = total - 6 - max(map(len, names))
        out += ["", "Commands:", *table([(n, command.commands[n].short_help(limit)) for n in names], total)]
    return "\n".join(out)


def fill(text: str, text_width: int, indent: str = "") -> str:
    """`text`'s paragraphs filled to `text_width` (after `indent`); `\\b` paragraphs kept as written."""
    paragraphs: list[tuple[int, bool, list[str]]] = []
    lines: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.strip():
            lines.append(line)
            continue
        if lines:
            margin = len(lines[0]) - len(lines[0].lstrip())
            raw = lines[0].strip() == "\b"
            paragraphs.append((margin, raw, lines[1:] if raw else [" ".join(s.strip() for s in lines)]))
        lines = []
    out = []
    for margin, raw, body in paragraphs:
        lead = indent + " " * margin
        if raw:
            out.append("\n".join(lead + line for line in body))
        else:
            wrapper = textwrap.TextWrapper(
                text_width + len(indent), initial_indent=lead, subsequent_indent=lead
            )
            out.append(wrapper.fill(body[0]))
    return "\n\n".join(out)


def table(rows: list[tuple[str, str]], total: int) -> list[str]:
    """Two columns, the second filled beside the first (under it when the first is too wide)."""
    first = min(max(len(name) for name, _ in rows), FIRST_COLUMN) + 2
    text_width = max(total - first - 2, 10)
    out = []
    for name, text in rows:
        lines = fill(text, text_width).splitlines() if text else []
        if not lines:
            out.append(" " * INDENT + name)
            continue
        if len(name) <= first - 2:
            out.append(" " * INDENT + name.ljust(first) + lines[0])
        else:
            out += [" " * INDENT + name, " " * (INDENT + first) + lines[0]]
        out += [" " * (INDENT + first) + line for line in lines[1:]]
    return out
