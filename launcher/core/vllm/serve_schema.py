"""The JSON Schema of the spec's `serve` section for one vLLM release, from its catalog. Pure.

Every option of the release's `vllm serve` is a property with its type, its range (the
release's config classes, as the catalog records them) and its choices, so an editor can
complete the section and mark a typo or a value out of range as it is written; the keys the
spec must not set are left out, and so marked as well. `validate` remains the judge: a
schema cannot say which values a rule refuses for a given model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from launcher.core.vllm.argv import PORTS, POSITIVE, SIZE
from launcher.core.vllm.catalog import Bounds, Catalog, Option

BOUND_WORDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}


def serve_schema(catalog: Catalog, excluded: Iterable[str]) -> dict[str, Any]:
    """`serve` for `catalog`'s release: every option but the `excluded` keys, nothing else."""
    skip = set(excluded)
    return {
        "type": "object",
        "description": f"`vllm serve` options of vLLM {catalog.version}, as snake_case keys",
        "properties": {key: option_schema(o) for key, o in catalog.options.items() if key not in skip},
        "additionalProperties": False,
    }


def option_schema(option: Option) -> dict[str, Any]:
    """One option's value: its type, range and choices, and its flag as the description."""
    about = option.flag + (f" (deprecated: {option.deprecated})" if option.deprecated else "")
    if option.kind in ("bool", "flag"):
        return {"type": "boolean", "description": about, **_deprecated(option)}
    one = _scalar(option)
    if option.many:
        one = {"anyOf": [one, {"type": "array", "items": one, "minItems": 1}]}
    return {**one, "description": about, **_deprecated(option)}


def _scalar(option: Option) -> dict[str, Any]:
    if option.type == "json":
        return {"type": ["object", "array", "string", "number", "boolean"]}
    if option.choices is not None:
        number = option.type in ("int", "float")
        return {"enum": [_number(c) if number else c for c in option.choices]}
    if option.type == "int":
        return {"type": "integer", **_range(option)}
    if option.type == "float":
        return {"type": "number", **_range(option)}
    if option.type == "size":
        pattern = "^" + SIZE.pattern.removesuffix(r"\Z") + "$"
        return {"anyOf": [{"type": "integer", **_range(option)}, {"type": "string", "pattern": pattern}]}
    return {"type": "string"}


def _range(option: Option) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if option.key in PORTS:
        limits = {"minimum": 1, "maximum": 65535}
    elif option.key in POSITIVE:
        limits = {"minimum": 1}
    bounds = option.bounds or Bounds()
    for name, word in BOUND_WORDS.items():
        value = getattr(bounds, name)
        if value is not None:
            limits[word] = value
    return limits


def _number(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _deprecated(option: Option) -> dict[str, Any]:
    return {"deprecated": True} if option.deprecated else {}
