"""A spec as commented YAML text, written by hand so every comment stays where it belongs. Pure.

`init` builds a tree of Entries (a key, its value, the comments above it, one after it);
`render` turns it into text that the project's own loader reads back to the same data.
A value that could not be decided is written as CHOOSE, which no spec check accepts, with
a `# CHOOSE:` comment above it saying what to pick from.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

import yaml

CHOOSE = "<CHOOSE>"  # fails validation wherever it stands: not a path, address, name or release
WIDTH = 100
SAFE = re.compile(r"[A-Za-z0-9_./@+-][A-Za-z0-9_./@+:-]*\Z")


@dataclass(frozen=True, slots=True)
class Entry:
    """One key of the spec: its value (or children), the comments above it and after it."""

    key: str
    value: Any = None  # a scalar, a list of scalars, or a flat mapping; None for a section
    children: tuple[Entry, ...] = ()  # a section: a mapping of entries
    items: tuple[tuple[Entry, ...], ...] = ()  # a list of mappings (the nodes)
    notes: tuple[str, ...] = ()  # comment lines above the key
    comment: str = ""  # a short comment after the value
    choose: str | None = None  # undecided: CHOOSE is written, and this says what to pick
    off: bool = False  # written commented out: a setting shown, not set
    quoted: bool = False  # a string always written in quotes (a release: "0.33" is no float)

    @property
    def section(self) -> bool:
        """True for a key holding entries rather than a value."""
        return bool(self.children or self.items)


def scalar(value: Any) -> str:
    """A YAML flow value that loads back as `value` (strings plain when that is unambiguous)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(str(k))}: {scalar(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if SAFE.match(text) and _reads_back(text):
        return text
    return quote(text)


def _reads_back(text: str) -> bool:
    """True when YAML reads `text`, written plain, as that same string (`@`, `%` start nothing)."""
    try:
        return bool(yaml.safe_load(text) == text)
    except yaml.YAMLError:
        return False


def quote(text: str) -> str:
    """A YAML double-quoted scalar: printable ASCII as is, everything else escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def comment_lines(texts: tuple[str, ...] | list[str], indent: str) -> list[str]:
    """Comment lines at `indent`, wrapped, control characters shown as '?'."""
    out = []
    for text in texts:
        clean = printable(text)
        lead = len(clean) - len(clean.lstrip(" "))
        width = max(40, WIDTH - len(indent) - 2 - lead)
        for line in textwrap.wrap(clean.strip(), width, break_on_hyphens=False) or [""]:
            out.append(f"{indent}# {' ' * lead}{line}".rstrip())
    return out


def render(header: list[str], entries: tuple[Entry, ...]) -> str:
    """The whole spec: the header comments, then every entry."""
    lines = comment_lines(header, "")
    for entry in entries:
        lines += _entry(entry, "")
    return "\n".join(lines) + "\n"


def _entry(entry: Entry, indent: str, dash: str = "") -> list[str]:
    """One entry's lines; `dash` is '- ' for the first key of a list item."""
    outer = indent[: len(indent) - len(dash)]
    lines = comment_lines(entry.notes, outer)
    if entry.choose:
        lines += comment_lines([f"CHOOSE: {entry.choose}"], outer)
    lead = outer + dash
    if entry.section:
        lines.append(_with_comment(f"{lead}{entry.key}:", entry.comment))
        for child in entry.children:
            lines += _entry(child, indent + "  ")
        for item in entry.items:
            for index, child in enumerate(item):
                lines += _entry(child, indent + "    ", "- " if index == 0 else "")
        return lines
    value = scalar(CHOOSE if entry.choose else entry.value)
    if entry.quoted and isinstance(entry.value, str) and not entry.choose:
        value = quote(entry.value)
    text = f"{lead}{entry.key}: {value}"
    if entry.off:
        text = f"{lead}# {entry.key}: {value}"
    return [*lines, _with_comment(text, entry.comment or ("<- edit" if entry.choose else ""))]


def _with_comment(text: str, comment: str) -> str:
    return f"{text}  # {printable(comment)}" if comment else text


def printable(text: str) -> str:
    """Text safe in a YAML comment: anything not printable (line breaks included) as '?'."""
    return "".join(c if c.isprintable() and c != "\ufeff" else "?" for c in text)


def choose_lines(text: str) -> list[int]:
    """The 1-based lines holding a CHOOSE value: what the user must edit."""
    return [n for n, line in enumerate(text.splitlines(), 1) if scalar(CHOOSE) in line.split("#")[0]]
