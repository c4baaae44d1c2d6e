"""Typed validation of plain data into frozen dataclasses, and their JSON Schema.

One small mechanism serves both the spec loader and `spark-launch schema`: the spec's
dataclasses are the single source of truth. It reports every problem at once, each with
its key path, and suggests the nearest known key for a misspelt one. Ours rather than
pydantic's or jsonschema's: the spec's problems are reported with the file and line of each
key (yamlsource keeps them), every one at once, in the launcher's words with a hint, on any
hostile input (tests/core/spec/test_spec_boundary.py), and the same dataclasses give the editor's
JSON Schema; a validation library would be a second description of the spec beside them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from launcher.errors import Problem

Path = tuple[str | int, ...]
_INVALID: Any = object()
UNKNOWN_KEY = "unknown key {!r}"
MAPPING_HINT = "write `key: value` lines indented under it (the files in configs/ show each section)"
CONTROL_HINT = "remove the control character (a stray paste?)"
ENV_MARK = "env value"
JSON_MARK = "JSON value"
# An environment value: YAML may write it as a number, the process sees a string.
EnvValue = typing.Annotated[str, ENV_MARK]
# A value that reaches a command line as text or JSON: null, true/false, a finite number,
# text, or lists and mappings (text keys) of those. Not a date, set or binary (YAML has them).
JsonValue = typing.Annotated[Any, JSON_MARK]
# Line breaks and tabs may be text (a chat template); other control characters never are.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def doc(text: str, **kwargs: Any) -> Any:
    """A dataclass field carrying its user-facing description."""
    return dataclasses.field(metadata={"doc": text}, **kwargs)


def suggest(word: str, choices: typing.Iterable[str]) -> str | None:
    """A 'did you mean' hint for a misspelt key, or None."""
    import difflib  # only a spec with a mistake needs it: not paid by every start

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def build(cls: type[Any], data: Any, path: Path, problems: list[Problem]) -> Any:
    """Turn `data` into an instance of dataclass `cls`, appending problems; may return INVALID."""
    if not isinstance(data, Mapping):
        problems.append(Problem(path, f"expected a mapping, got {_kind(data)}", MAPPING_HINT))
        return _INVALID
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            # Reported, but the rest is still built so later checks can report theirs too.
            problems.append(
                Problem((*path, str(key)), UNKNOWN_KEY.format(key), suggest(str(key), fields), cause=True)
            )
            continue
        values[key] = convert(hints[key], value, (*path, key), problems)
    for name, f in fields.items():
        if name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(Problem((*path, name), "is required", f.metadata.get("doc")))
            values[name] = _INVALID
    if any(v is _INVALID for v in values.values()):
        return _INVALID
    return cls(**values)


def convert(tp: Any, value: Any, path: Path, problems: list[Problem]) -> Any:
    """Check and convert one value against a type hint."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        if JSON_MARK in tp.__metadata__:
            return _json_value(value, path, problems)
        return _env_value(value, path, problems)
    if dataclasses.is_dataclass(tp):
        return build(typing.cast(type[Any], tp), value, path, problems)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return convert(inner, value, path, problems)
    if origin is Literal:
        if value in args:
            return value
        choices = [str(a) for a in args]
        problems.append(
            Problem(
                path,
                f"must be one of {', '.join(choices)}; got {value!r}",
                suggest(str(value), choices) or "write one of them",
            )
        )
        return _INVALID
    if origin is tuple:
        return _sequence(args[0], value, path, problems)
    if origin in (dict, Mapping):
        return _mapping(args[1], value, path, problems)
    if tp is Any:
        return value
    return _scalar(tp, value, path, problems)


def text_problem(text: str) -> str | None:
    """Why `text` cannot be a spec value (a NUL or a control character), or None."""
    bad = _CONTROL.search(text)
    if bad is None:
        return None
    if bad.group() == "\x00":
        return "contains a NUL character, which no command line, environment or file name can hold"
    return f"contains the control character {bad.group()!r}"


def _scalar(tp: type, value: Any, path: Path, problems: list[Problem]) -> Any:
    ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if ok and isinstance(value, str) and text_problem(value):
        problems.append(Problem(path, f"{value!r} {text_problem(value)}", CONTROL_HINT))
        return _INVALID
    if ok:
        return value
    hint = "quote it to make it text" if tp is str and _quotable(value) else _EXAMPLES.get(tp)
    problems.append(Problem(path, f"expected {_NAMES.get(tp, tp.__name__)}, got {_kind(value)}", hint))
    return _INVALID


def _quotable(value: Any) -> bool:
    return isinstance(value, int | float) or value is None or type(value).__name__ in ("date", "datetime")


def _sequence(item: Any, value: Any, path: Path, problems: list[Problem]) -> Any:
    if not isinstance(value, list):
        problems.append(
            Problem(path, f"expected a list, got {_kind(value)}", "write [a, b], or one '- item' a line")
        )
        return _INVALID
    out = tuple(convert(item, v, (*path, i), problems) for i, v in enumerate(value))
    return _INVALID if any(v is _INVALID for v in out) else out


def _mapping(item: Any, value: Any, path: Path, problems: list[Problem]) -> Any:
    if not isinstance(value, Mapping):
        problems.append(Problem(path, f"expected a mapping, got {_kind(value)}", MAPPING_HINT))
        return _INVALID
    out = {}
    for key, v in value.items():
        if not _key_ok(key, (*path, str(key)), problems):
            out[str(key)] = _INVALID
            continue
        out[key] = convert(item, v, (*path, key), problems)
    return _INVALID if any(v is _INVALID for v in out.values()) else out


def _key_ok(key: Any, path: Path, problems: list[Problem]) -> bool:
    """A mapping key must be text without control characters (it becomes a name or a flag)."""
    if not isinstance(key, str):
        problems.append(Problem(path, f"a key must be text, got {_kind(key)}", "quote it"))
        return False
    if text_problem(key):
        problems.append(Problem(path, f"the key {key!r} {text_problem(key)}", CONTROL_HINT))
        return False
    return True


def _json_value(value: Any, path: Path, problems: list[Problem]) -> Any:
    """`value` when it is plain JSON data (see JsonValue); else problems, and INVALID."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        problems.append(
            Problem(path, f"must be a finite number, got {value!r}", "write a number, not .inf or .nan")
        )
    elif isinstance(value, str):
        if not text_problem(value):
            return value
        problems.append(Problem(path, f"{value!r} {text_problem(value)}", CONTROL_HINT))
    elif isinstance(value, list):
        items = [_json_value(v, (*path, i), problems) for i, v in enumerate(value)]
        return _INVALID if any(v is _INVALID for v in items) else items
    elif isinstance(value, dict):
        out = {
            k: _json_value(v, (*path, k), problems)
            for k, v in value.items()
            if _key_ok(k, (*path, str(k)), problems)
        }
        return _INVALID if len(out) < len(value) or any(v is _INVALID for v in out.values()) else out
    else:
        hint = "write a list" if isinstance(value, set | frozenset) else "quote it to make it text"
        problems.append(Problem(path, f"{_kind(value)} is not a value a command line can take", hint))
    return _INVALID


def _env_value(value: Any, path: Path, problems: list[Problem]) -> Any:
    if isinstance(value, str):
        return _scalar(str, value, path, problems)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    problems.append(
        Problem(
            path,
            f"an environment value must be a string or a number, got {_kind(value)}",
            'quote it, e.g. "1" or "true"',
        )
    )
    return _INVALID


_NAMES = {str: "a string", int: "an integer", bool: "true or false", float: "a number"}
_EXAMPLES = {
    int: "write a whole number, e.g. 1",
    bool: "write true or false",
    float: "write a number, e.g. 0.5",
}


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {
        bool: "true/false",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value)) or _YAML_KINDS.get(type(value).__name__, type(value).__name__)


# What else YAML can construct (by name: the core does not import the clock's module).
_YAML_KINDS = {
    "date": "a date",
    "datetime": "a date and time",
    "bytes": "binary data (!!binary)",
    "set": "a set (!!set)",
}


def json_schema(cls: type[Any], title: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of dataclass `cls`, for editors."""
    defs: dict[str, Any] = {}
    _schema_of(cls, defs)
    top = defs.pop(cls.__name__)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **top, "$defs": defs}


def _schema_of(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return {} if JSON_MARK in tp.__metadata__ else {"type": ["string", "number"]}
    if dataclasses.is_dataclass(tp):
        name = typing.cast(type, tp).__name__
        if name not in defs:
            defs[name] = {}  # placeholder against recursion
            hints = typing.get_type_hints(tp, include_extras=True)
            props, required = {}, []
            for f in dataclasses.fields(tp):
                if not f.init:
                    continue
                props[f.name] = {**_schema_of(hints[f.name], defs), **_description(f)}
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    required.append(f.name)
            defs[name] = {
                "type": "object",
                "description": (tp.__doc__ or "").strip(),
                "properties": props,
                "required": required,
                "additionalProperties": False,
            }
        return {"$ref": f"#/$defs/{name}"}
    if origin in (Union, types.UnionType):
        inner = [_schema_of(a, defs) for a in args if a is not type(None)]
        return {"anyOf": [*inner, {"type": "null"}]}
    if origin is Literal:
        return {"enum": list(args)}
    if origin is tuple:
        return {"type": "array", "items": _schema_of(args[0], defs)}
    if origin in (dict, Mapping):
        return {"type": "object", "additionalProperties": _schema_of(args[1], defs)}
    if tp is Any:
        return {}
    return {"type": {str: "string", int: "integer", bool: "boolean", float: "number"}[tp]}


def _description(f: dataclasses.Field[Any]) -> dict[str, Any]:
    text = f.metadata.get("doc")
    return {"description": text} if text else {}
