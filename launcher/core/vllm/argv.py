"""Spec values to `vllm serve` arguments, by what the release's catalog says an option takes.

Single values are written `--flag=value`, so a value that starts with '-' can never be
read as another flag; every value stays exactly one argv element.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

from launcher.core.spec.schema import suggest
from launcher.core.vllm.catalog import Option

# What vLLM's human_readable_int accepts: 4096, 128k, 1.5M, 2Gi, or "auto" for lengths.
SIZE = re.compile(r"(\d+(\.\d+)?[kKmMgGtT]i?|\d+|auto|-1)\Z")
# Counts and sizes: 0 or less is never meant (vLLM would fail late, or quietly use a default).
POSITIVE = frozenset(
    {
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "data_parallel_size_local",
        "decode_context_parallel_size",
        "prefill_context_parallel_size",
        "block_size",
        "mamba_block_size",
        "max_num_seqs",
    }
)
PORTS = frozenset(
    {"port", "master_port", "data_parallel_rpc_port", "grpc_port", "data_parallel_supervisor_port"}
)
INT_LIMIT = 1 << 63  # what the engine's integers hold


class BadValue(ValueError):
    """A spec value the option cannot take; the message says what it needs, the hint how."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def json_arg(value: Any) -> str:
    """A JSON value in one canonical form, so equal specs give byte-equal commands."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check_value(option: Option, value: Any, choices: bool = True) -> None:
    """BadValue unless `value` has the type and range `option` takes (and one of its choices)."""
    if value is None:
        raise BadValue("has no value", "give one, or remove the key")
    if option.kind in ("bool", "flag"):
        if not isinstance(value, bool):
            raise BadValue(f"expected true or false, got {value!r}", "write true or false")
        return
    if not choices:
        option = dataclasses.replace(option, choices=None)
    if option.many:
        texts = [_scalar_text(option, v) for v in _items(value)]
        if not texts or any(t.startswith("-") for t in texts):
            # Written as separate words after the flag: a word starting with '-' is another option.
            raise BadValue(
                "needs a non-empty list, and no item may start with '-'", "write [a, b], each item a word"
            )
        return
    _scalar_text(option, value)


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def option_args(option: Option, value: Any) -> tuple[str, ...]:
    """The argv for `option` set to `value`; BadValue when the value does not fit."""
    check_value(option, value)
    if option.kind == "bool":
        if value:
            return (option.flag,)
        if not option.negative:
            raise BadValue(
                "this release has no way to turn it off on the command line",
                "remove the key (off is its default)",
            )
        return (option.negative[0],)
    if option.kind == "flag":
        return (option.flag,) if value else ()
    if option.many:
        return (option.flag, *(_scalar_text(option, v) for v in _items(value)))
    return (f"{option.flag}={_scalar_text(option, value)}",)


def _scalar_text(option: Option, value: Any) -> str:
    if option.type == "json":
        return value if isinstance(value, str) else json_arg(value)
    if isinstance(value, bool | dict | list):
        raise BadValue(f"expected {_expects(option)}, got {value!r}", _takes(option))
    if option.type == "int":
        _check_int(option, value)
    if option.type == "float" and not (isinstance(value, int) or _finite(value)):
        raise BadValue(f"expected a finite number, got {value!r}", _takes(option))
    text = str(value)
    if option.type == "size" and not SIZE.match(text):
        raise BadValue(f"expected {_expects(option)}, got {value!r}", _takes(option))
    _check_bounds(option, value)
    if option.choices is not None and text not in option.choices:
        raise BadValue(
            f"{value!r} is not one of {', '.join(option.choices)}",
            suggest(text, option.choices) or f"the choices of {option.flag} in this release",
        )
    return text


def _check_int(option: Option, value: Any) -> None:
    if not isinstance(value, int):
        raise BadValue(f"expected an integer, got {value!r}", _takes(option))
    if option.key in PORTS and not 0 < value < 65536:
        raise BadValue(f"must be a port number, got {value!r}", "1 to 65535")
    if option.key in POSITIVE and value < 1:
        raise BadValue(f"must be a positive integer, got {value!r}", "1 or more")
    if not -INT_LIMIT <= value < INT_LIMIT:
        raise BadValue(f"{value} is out of range for an integer option", "at most 2**63 - 1")


def _check_bounds(option: Option, value: Any) -> None:
    """The range the release's config class keeps (vLLM itself refuses it only on the node, late)."""
    bounds = option.bounds
    if bounds is None or not isinstance(value, int | float) or bounds.holds(value):
        return
    interval = bounds.text[0] in "(["
    hint = f"vLLM's config keeps {option.flag} {'in ' if interval else ''}{bounds.text}"
    if option.key == "gpu_memory_utilization" and 1 < value <= 100:
        hint = f"a fraction of the GPU's memory, not a percentage: {value / 100:g} for {value:g}%"
    raise BadValue(
        f"{value!r} is outside {bounds.text}" if interval else f"must be {bounds.text}, got {value!r}", hint
    )


def _finite(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def _takes(option: Option) -> str:
    """What the option's value looks like, for a hint."""
    return f"{option.flag} takes {_expects(option)}"


def _expects(option: Option) -> str:
    return {"int": "an integer", "float": "a number", "size": "a size like 4096 or '128k'"}.get(
        option.type or "", "a string"
    )
