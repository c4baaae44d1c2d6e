"""YAML text in, plain data out, with the line of every key kept for error messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from launcher.errors import Problem, SpecError

Path = tuple[str | int, ...]

try:  # libyaml when present: a spec loads in a fraction of the pure-Python time
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader


@dataclass(frozen=True)
class Document:
    """A loaded YAML document: its data and the 1-based line of each key path."""

    filename: str
    data: Any
    lines: dict[Path, int]

    def error(self, problems: list[Problem]) -> SpecError:
        """A SpecError for this document, located with its lines."""
        return SpecError(self.filename, problems, self.lines)


def load_document(text: str, filename: str) -> Document:
    """Parse YAML text; a syntax error or a duplicate key is a SpecError with its line."""
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise SpecError(filename, [Problem((), f"not valid YAML: {exc.problem}")], {(): line}) from None
    lines: dict[Path, int] = {(): 1}
    problems: list[Problem] = []
    if node is not None:
        _walk(node, (), lines, problems)
    if problems:
        raise SpecError(filename, problems, lines)
    return Document(filename, data, lines)


def _walk(node: yaml.Node, path: Path, lines: dict[Path, int], problems: list[Problem]) -> None:
    """Record the line of every key below `node`, and flag keys written twice."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            child = (*path, key)
            if child in lines:
                problems.append(Problem(child, f"key {key!r} is written twice", "keep one of them"))
            lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines, problems)
