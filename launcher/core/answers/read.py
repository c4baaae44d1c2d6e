"""Reading a node's JSON answer strictly: each value's type, length, characters and range. Pure.

A node is not trusted: what its script prints may be forged by whoever controls it. Every
answer is read through `At`, which knows where in the answer it stands, so what does not
parse is a `BadAnswer` saying where and what (`files['../x']: ..`), never a KeyError later.
Names and paths never hold control characters; relative paths stay inside (no `..`, no
leading `/`); sizes and counts are bounded. Free text (a log, an error message) may hold
any character, up to a length: what prints it escapes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

MAX_NAME = 255  # a file name, a host name, an id
MAX_PATH = 4096  # as Linux's PATH_MAX
MAX_TEXT = 64 << 10  # an error message, a version string
MAX_CONTENT = 64 << 20  # a log chunk, a gathered file
MAX_ITEMS = 1_000_000  # entries of one list or mapping (a model of a million files is not one)
MAX_BYTES = 1 << 60  # sizes, free space: 1 EiB
MAX_DEPTH = 32  # nesting of free-form JSON (a model's config.json)
# Control characters, and the ones that reorder or break what a terminal shows.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# The launcher's run ids (`node.cluster.new_run_id`): the time of the start and 4 hex digits.
RUN_ID = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{4}\Z")
# What a name from a node keeps when it becomes one part of a local file name.
PLAIN = re.compile(r"[^A-Za-z0-9._-]")


class BadAnswer(ValueError):
    """A node's answer that does not parse: where in it, and what is wrong."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.where, self.why = where, why


class Refused(Exception):
    """A well-formed answer that says the job failed on the node, and why."""


def loads(line: str | bytes) -> object:
    """One JSON value; BadAnswer when it is not JSON (or nests beyond reason)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise BadAnswer("answer", f"not JSON ({str(exc)[:80]})") from None


@dataclass(frozen=True, slots=True)
class At:
    """A value of an answer, and where it is in it."""

    value: object
    where: str = "answer"

    def _bad(self, why: str) -> BadAnswer:
        return BadAnswer(self.where, why)

    def _kind(self) -> str:
        return "null" if self.value is None else type(self.value).__name__

    # -- structure ------------------------------------------------------------------------
    def fields(self) -> dict[str, Any]:
        """The value as a JSON object."""
        if not isinstance(self.value, dict):
            raise self._bad(f"expected an object, got {self._kind()}")
        return self.value

    def field(self, key: str) -> At:
        """A key the object must have."""
        found = self.fields()
        if key not in found:
            raise BadAnswer(self.where, f"has no {key!r}")
        return At(found[key], self._child(key))

    def get(self, key: str) -> At | None:
        """A key the object may have (absent and null alike are None)."""
        value = self.fields().get(key)
        return None if value is None else At(value, self._child(key))

    def maybe(self, key: str, read: Callable[[At], T]) -> T | None:
        """`read` of an optional key, or None."""
        found = self.get(key)
        return None if found is None else read(found)

    def items(self, limit: int = MAX_ITEMS) -> list[At]:
        """The value as a JSON list of at most `limit` entries."""
        if not isinstance(self.value, list):
            raise self._bad(f"expected a list, got {self._kind()}")
        if len(self.value) > limit:
            raise self._bad(f"{len(self.value)} entries, more than {limit}")
        return [At(v, f"{self.where}[{i}]") for i, v in enumerate(self.value)]

    def entries(self, key: Callable[[At], str], limit: int = MAX_ITEMS) -> dict[str, At]:
        """The value as an object of at most `limit` keys, each key read by `key`."""
        found = self.fields()
        if len(found) > limit:
            raise self._bad(f"{len(found)} keys, more than {limit}")
        return {key(At(k, f"{self.where} key {k[:80]!r}")): At(v, self._child(k)) for k, v in found.items()}

    def _child(self, key: str) -> str:
        return f"{self.where}[{key[:80]!r}]" if self.where != "answer" else key[:80]

    # -- scalars --------------------------------------------------------------------------
    def flag(self) -> bool:
        """true or false."""
        if not isinstance(self.value, bool):
            raise self._bad(f"expected true or false, got {self._kind()}")
        return self.value

    def integer(self, low: int = 0, high: int = MAX_BYTES) -> int:
        """A whole number in [low, high]."""
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self._bad(f"expected a whole number, got {self._kind()}")
        if not low <= self.value <= high:
            raise self._bad(f"{self.value} is out of range ({low} to {high})")
        return self.value

    def number(self, low: float = 0.0, high: float = 1e18) -> float:
        """A number in [low, high] (a time, a rate)."""
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise self._bad(f"expected a number, got {self._kind()}")
        if not low <= self.value <= high:  # NaN fails this too
            raise self._bad(f"{self.value} is out of range ({low} to {high})")
        return float(self.value)

    def text(self, limit: int = MAX_TEXT) -> str:
        """Free text (an error message, a log): any characters, up to `limit`; shown escaped."""
        return self._string(limit)

    def content(self, limit: int = MAX_CONTENT) -> str:
        """Content passed on as it is (a log chunk, a gathered file), up to `limit`."""
        return self._string(limit)

    def name(self, limit: int = MAX_NAME) -> str:
        """One word of one line: a file or host name, an id, a version. No control characters."""
        value = self._string(limit)
        if not value:
            raise self._bad("is empty")
        bad = CONTROL.search(value)
        if bad:
            raise self._bad(f"holds the control character {bad.group()!r}")
        return value

    def matching(self, pattern: re.Pattern[str], what: str, limit: int = MAX_NAME) -> str:
        """A name `pattern` matches from its start (anchor its end with \\Z); `what` it must be, in
        words, for the error."""
        value = self.name(limit)
        if not pattern.match(value):
            raise self._bad(f"{value[:80]!r} is not {what}")
        return value

    def run_id(self) -> str:
        """A run id in the launcher's own format (it names files: nothing else passes)."""
        value = self._string(MAX_NAME)
        if not is_run_id(value):
            raise self._bad(f"{value[:80]!r} is not a run id of the launcher's (YYYYMMDD-HHMMSS-xxxx)")
        return value

    def relative(self) -> str:
        """A path inside a directory: relative, no `.`, `..` or empty parts, no control characters."""
        value = self.name(MAX_PATH)
        parts = value.split("/")
        if value.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise self._bad(f"{value[:120]!r} is not a path inside the directory")
        return value

    def absolute(self) -> str:
        """An absolute path without control characters."""
        value = self.name(MAX_PATH)
        if not value.startswith("/"):
            raise self._bad(f"{value[:120]!r} is not an absolute path")
        return value

    def hexdigest(self, length: int = 64) -> str:
        """A hash as lower-case hex digits (a sha256 by default)."""
        value = self._string(length)
        if len(value) != length or value.strip("0123456789abcdef"):
            raise self._bad(f"{value[:80]!r} is not {length} hex digits")
        return value

    def one_of(self, *choices: str) -> str:
        """One of the words given."""
        value = self._string(MAX_NAME)
        if value not in choices:
            raise self._bad(f"{value[:80]!r} is not one of {', '.join(choices)}")
        return value

    def _string(self, limit: int) -> str:
        if not isinstance(self.value, str):
            raise self._bad(f"expected text, got {self._kind()}")
        if len(self.value) > limit:
            raise self._bad(f"{len(self.value)} characters, more than {limit}")
        return self.value

    # -- free-form ------------------------------------------------------------------------
    def json(self, depth: int = MAX_DEPTH, limit: int = 100_000) -> Any:
        """Any JSON value nested at most `depth` deep, with at most `limit` values in all."""
        count = [0]

        def walk(value: object, level: int) -> None:
            count[0] += 1
            if level > depth or count[0] > limit:
                raise self._bad(f"nests deeper than {depth} or holds more than {limit} values")
            children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
            for child in children:
                walk(child, level + 1)

        walk(self.value, 0)
        return self.value


def strings(at: At, read: Callable[[At], str] = At.name, limit: int = MAX_ITEMS) -> tuple[str, ...]:
    """A list of strings, each read by `read`."""
    return tuple(read(item) for item in at.items(limit))


def is_run_id(value: object) -> bool:
    """Whether `value` is a run id in the launcher's own format."""
    return isinstance(value, str) and RUN_ID.match(value) is not None


def flat_name(value: str, limit: int = 120) -> str:
    """A name from a node as ONE part of a local file name: every character but letters, digits,
    `.`, `_` and `-` becomes `_` (so no `/`), no leading `.` (so no `..`), never empty."""
    flat = PLAIN.sub("_", value)[:limit].lstrip(".")
    return flat or "_"
