"""Spec values to `vllm serve` arguments, by what the release's catalog says an option takes.

Single values are written `--flag=value`, so a value that starts with '-' can never be
read as another flag; every value stays exactly one argv element.
"""

from __future__ import annotations

import json
import re
from typing import Any

from launcher.core.catalog import Option

# What vLLM's human_readable_int accepts: 4096, 128k, 1.5M, 2Gi, or "auto" for lengths.
SIZE = re.compile(r"(\d+(\.\d+)?[kKmMgGtT]i?|\d+|auto|-1)\Z")


class BadValue(ValueError):
    """A spec value the option cannot take; the message says what it needs."""


def json_arg(value: Any) -> str:
    """A JSON value in one canonical form, so equal specs give byte-equal commands."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def option_args(option: Option, value: Any) -> tuple[str, ...]:
    """The argv for `option` set to `value`; BadValue when the value does not fit."""
    if value is None:
        raise BadValue("has no value; give one or remove the key")
    if option.kind == "bool":
        if not isinstance(value, bool):
            raise BadValue(f"expected true or false, got {value!r}")
        if value:
            return (option.flag,)
        if not option.negative:
            raise BadValue("this release has no way to turn it off on the command line")
        return (option.negative[0],)
    if option.kind == "flag":
        if not isinstance(value, bool):
            raise BadValue(f"expected true or false, got {value!r}")
        return (option.flag,) if value else ()
    if option.many:
        items = value if isinstance(value, list) else [value]
        texts = [_scalar_text(option, v) for v in items]
        if not texts or any(t.startswith("-") for t in texts):
            raise BadValue("needs a non-empty list, and no item may start with '-'")
        return (option.flag, *texts)
    return (f"{option.flag}={_scalar_text(option, value)}",)


def _scalar_text(option: Option, value: Any) -> str:
    if option.type == "json":
        return value if isinstance(value, str) else json_arg(value)
    if isinstance(value, bool | dict | list):
        raise BadValue(f"expected {_expects(option)}, got {value!r}")
    if option.type == "int" and not isinstance(value, int):
        raise BadValue(f"expected an integer, got {value!r}")
    if option.type == "float" and not isinstance(value, int | float):
        raise BadValue(f"expected a number, got {value!r}")
    text = str(value)
    if option.type == "size" and not SIZE.match(text):
        raise BadValue(f"expected {_expects(option)}, got {value!r}")
    if option.choices is not None and text not in option.choices:
        raise BadValue(f"{value!r} is not one of {', '.join(option.choices)}")
    return text


def _expects(option: Option) -> str:
    return {"int": "an integer", "float": "a number", "size": "a size like 4096 or '128k'"}.get(
        option.type or "", "a string"
    )
