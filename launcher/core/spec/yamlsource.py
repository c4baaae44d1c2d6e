"""YAML text in, plain data out, with the line of every key kept for error messages.

Total on any input: bytes that are not UTF-8, characters YAML forbids, aliases that expand
without end (an "alias bomb" of a few hundred bytes names billions of values), recursive
aliases, deep nesting, numbers of thousands of digits and values YAML cannot construct
all end as a located SpecError, never an exception or minutes of work. The limits are far
above what a deployment spec needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from launcher.errors import Problem, SpecError

Path = tuple[str | int, ...]

MAX_BYTES = 256 << 10  # a spec file; the examples are about 2 KiB, 100 nodes about 20
MAX_VALUES = 10_000  # values after every alias is expanded
MAX_DEPTH = 32  # levels of nesting
MAX_SCALAR = 1 << 16  # characters in one value (an inline chat template fits)
MAX_NUMBER = 40  # characters of a number: 64-bit values need 20

# What YAML 1.1 lets a file hold (PyYAML's reader refuses the rest without a line number).
_NOT_YAML = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_NUMBER_TAGS = {"tag:yaml.org,2002:int": "integer", "tag:yaml.org,2002:float": "number"}
_TAG_NAMES = {**_NUMBER_TAGS, "tag:yaml.org,2002:timestamp": "date", "tag:yaml.org,2002:bool": "boolean"}

try:  # libyaml when present: a spec loads in a fraction of the pure-Python time
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader
_NODE_EVENTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)


@dataclass(frozen=True, slots=True)
class Document:
    """A loaded YAML document: its data and the 1-based line of each key path."""

    filename: str
    data: Any
    lines: dict[Path, int]

    def error(self, problems: list[Problem]) -> SpecError:
        """A SpecError for this document, located with its lines."""
        return SpecError(self.filename, problems, self.lines)


class _Refused(Exception):
    """One reason the document is not loaded, at one path and line."""

    def __init__(self, path: Path, line: int, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.problem = Problem(path, message, hint)
        self.line = line

    def located(self, filename: str) -> SpecError:
        """The SpecError of `filename` saying so."""
        return SpecError(filename, [self.problem], {self.problem.path: self.line})


def decode(data: bytes, filename: str) -> str:
    """The text of a spec file's bytes; a SpecError when it is too large or not UTF-8."""
    try:
        if len(data) > MAX_BYTES:
            raise _Refused((), 1, f"the file is larger than {MAX_BYTES >> 10} KiB; a spec is a few KiB")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        refused = _Refused(
            (),
            line,
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column}",
            "save the file as UTF-8",
        )
    except _Refused as exc:
        refused = exc
    raise refused.located(filename) from None


def load_document(text: str, filename: str) -> Document:
    """Parse YAML text; any problem (syntax, duplicate key, limits) is a SpecError with its line."""
    try:
        node, data = _parse(text)
    except _Refused as exc:
        raise exc.located(filename) from None
    except yaml.MarkedYAMLError as exc:
        line, message, hint = slip(exc, text)
        raise SpecError(filename, [Problem((), message, hint)], {(): line}) from None
    except (yaml.YAMLError, RecursionError) as exc:  # the pure-Python parser's own limits
        raise SpecError(filename, [Problem((), f"not valid YAML: {exc}")], {(): 1}) from None
    lines: dict[Path, int] = {(): 1}
    problems: list[Problem] = []
    if node is not None:
        _walk(node, (), lines, problems)
    if problems:
        raise SpecError(filename, problems, lines)
    return Document(filename, data, lines)


# PyYAML's words for the common slips (libyaml's and the pure parser's): what each means, its fix,
# and whether it is located where it began (a quote opened, a key) rather than where it broke.
_SLIPS = (
    (
        "quoted scalar",
        "end of stream",
        "a quote opened here is never closed",
        "close it on the same line",
        True,
    ),
    ("simple key", "expected ':'", "a key without ':'", "write `key: value`, a colon and a space", True),
    (
        "",
        "mapping values are not allowed",
        "a ':' where no key can start",
        "a line above may lack ': ' (a colon and a space), a value holding ': ' needs quotes, or "
        "this line is indented deeper than its neighbours",
        False,
    ),
    (
        "block mapping",
        "",
        "this line is not aligned with the keys above it",
        "indent the keys of one section by the same number of spaces",
        False,
    ),
    (
        "block collection",
        "",
        "this line is not aligned with the list items above it",
        "start each item with '- ' at the same indentation",
        False,
    ),
    ("flow sequence", "", "a '[' opened here is never closed", "close the list with ']'", True),
    ("flow mapping", "", "a '{' opened here is never closed", "close the mapping with '}'", True),
)


def slip(exc: yaml.MarkedYAMLError, text: str) -> tuple[int, str, str | None]:
    """(line, message, hint) for YAML that does not parse: where, what went wrong in words, and
    the fix; the column in the message. A tab is named: YAML indents with spaces only."""
    lines = text.splitlines() or [""]
    mark = exc.problem_mark or exc.context_mark
    row, col = (mark.line, mark.column) if mark else (0, 0)
    row = min(row, len(lines) - 1)  # at the end of a file without a final line break: its last line
    if "\t" in lines[row][: col + 1] and "cannot start any token" in str(exc.problem):
        col = lines[row].index("\t")
        return (
            row + 1,
            f"not valid YAML at column {col + 1}: a tab",
            "YAML indents with spaces: replace the tab",
        )
    for context, problem, meaning, hint, where_begun in _SLIPS:
        if context in str(exc.context or "") and problem in str(exc.problem or ""):
            if where_begun and exc.context_mark is not None:
                row, col = min(exc.context_mark.line, len(lines) - 1), exc.context_mark.column
            return row + 1, f"not valid YAML at column {col + 1}: {meaning}", hint
    return row + 1, f"not valid YAML at column {col + 1}: {exc.problem}", None


def _parse(text: str) -> tuple[yaml.Node | None, Any]:
    """The node graph, measured against the limits, then constructed."""
    bad = _NOT_YAML.search(text)
    if bad:
        raise _Refused(
            (),
            text.count("\n", 0, bad.start()) + 1,
            f"the file holds the character {bad.group()!r}, which YAML does not allow",
            f'write it as an escape inside double quotes, e.g. "\\x{ord(bad.group()):02x}"',
        )
    _count_values(text)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _measure(node, (), 0, {}, set())
        try:
            return node, loader.construct_document(node)
        except yaml.MarkedYAMLError:
            raise
        except Exception as exc:  # PyYAML's constructors fail in many ways on an explicit tag (!!bool 2)
            raise _unconstructible(node, exc) from None
    finally:
        loader.dispose()


def _count_values(text: str) -> None:
    """_Refused at the value past MAX_VALUES, before any is composed: a huge file costs little."""
    count = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, _NODE_EVENTS):
            count += 1
            if count > MAX_VALUES:
                line = event.start_mark.line + 1 if event.start_mark else 1
                raise _Refused(
                    (), line, f"the file holds more than {MAX_VALUES} values; a spec needs a few hundred"
                )


def _children(node: yaml.Node, path: Path) -> list[tuple[yaml.Node, Path]]:
    if isinstance(node, yaml.MappingNode):
        out = []
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else "?"
            out += [(key, (*path, name)), (value, (*path, name))]
        return out
    if isinstance(node, yaml.SequenceNode):
        return [(item, (*path, i)) for i, item in enumerate(node.value)]
    return []


def _measure(
    node: yaml.Node, path: Path, level: int, memo: dict[int, tuple[int, int]], active: set[int]
) -> tuple[int, int]:
    """(values below and at `node` with aliases expanded, its height); _Refused past a limit.

    Each node is measured once (aliases share nodes), so a bomb costs its size in the file.
    """
    line = node.start_mark.line + 1
    if id(node) in active:
        raise _Refused(
            path,
            line,
            "an alias refers to a value that contains it (a recursive structure)",
            "remove the alias",
        )
    if id(node) not in memo:
        if level > MAX_DEPTH:
            raise _Refused(path, line, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            _check_scalar(node, path)
        active.add(id(node))
        size, height = 1, 0
        for child, child_path in _children(node, path):
            child_size, child_height = _measure(child, child_path, level + 1, memo, active)
            size, height = size + child_size, max(height, child_height + 1)
            if size > MAX_VALUES:
                break  # refused below; the rest need not be counted
        active.discard(id(node))
        memo[id(node)] = (size, height)
    size, height = memo[id(node)]
    if level + height > MAX_DEPTH:
        raise _Refused(path, line, f"nested deeper than {MAX_DEPTH} levels (aliases expanded)")
    if size > MAX_VALUES:
        raise _Refused(
            path,
            line,
            f"aliases expand to more than {MAX_VALUES} values here",
            "write the values out, or use fewer nested aliases",
        )
    return size, height


def _check_scalar(node: yaml.ScalarNode, path: Path) -> None:
    line, text = node.start_mark.line + 1, node.value
    if node.tag in _NUMBER_TAGS and len(text) > MAX_NUMBER:
        raise _Refused(path, line, f"a number of {len(text)} characters is not a usable value")
    if len(text) > MAX_SCALAR:
        raise _Refused(path, line, f"a value of {len(text)} characters; a spec allows {MAX_SCALAR}")


def _unconstructible(root: yaml.Node, exc: Exception) -> _Refused:
    """The first scalar YAML cannot turn into its type (a date 2024-13-01, !!int 0x)."""
    stack: list[tuple[yaml.Node, Path]] = [(root, ())]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            try:
                SafeConstructor().construct_object(node)
            except Exception as error:  # as above; a MarkedYAMLError names its own line anyway
                kind = _TAG_NAMES.get(node.tag, node.tag)
                return _Refused(
                    path,
                    node.start_mark.line + 1,
                    f"{node.value!r} is not a valid {kind}: {error}",
                    "quote it to keep it as text",
                )
        stack += reversed(_children(node, path))
    return _Refused((), 1, f"not valid YAML: {exc}")


def _walk(node: yaml.Node, path: Path, lines: dict[Path, int], problems: list[Problem]) -> None:
    """Record the line of every key below `node`, and flag keys written twice."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
            child = (*path, key)
            if child in lines:
                problems.append(
                    Problem(child, f"key {key!r} is written twice", "keep one of them", cause=True)
                )
            lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines, problems)
