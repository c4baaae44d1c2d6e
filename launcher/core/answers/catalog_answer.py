"""The learn_catalog script's answer: a vLLM build's flag catalog, read strictly. Pure.

A catalog decides the words the plan puts on every node's command line: a forged one could map a
setting the plan pins itself (prefix caching) to a flag that runs the model's own code. So beside
types, lengths and counts, every option's flags must be its key's own (`core.vllm.catalog.
own_flags`: `--key`, its `--no-` form, the `--enable-`/`--disable-` pair, and the aliases vLLM
really has). The document comes back whole and normalised: what the launcher keeps in its cache,
and what it compares between nodes.
"""

from __future__ import annotations

import re
from typing import Any

from launcher.core.answers.read import MAX_TEXT, At, BadAnswer
from launcher.core.vllm.catalog import own_flags

KEY = re.compile(r"[a-z][a-z0-9_]{0,80}\Z")
SHORT = re.compile(r"-[A-Za-z]{1,4}\Z")
WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,120}\Z")  # an architecture, a model type, a method
KINDS = ("bool", "flag", "value")
TYPES = ("int", "float", "size", "json", "str")
MAX_OPTIONS = 5_000
MAX_MODELS = 20_000


def catalog_document(raw: object) -> dict[str, Any]:
    """The catalog document (as `scripts/gen_catalog.py` writes it), every value checked."""
    at = At(raw, "catalog")
    models = at.field("models")
    return {
        "vllm_version": at.field("vllm_version").name(64),
        "options": {k: _option(k, v) for k, v in at.field("options").entries(_key, MAX_OPTIONS).items()},
        "models": {
            "architectures": {
                k: _traits(v) for k, v in models.field("architectures").entries(_word, MAX_MODELS).items()
            },
            "mla_model_types": _words(models.get("mla_model_types")),
            "speculative": {
                k: _words(v) for k, v in (models.get("speculative") or At({})).entries(_word, 100).items()
            },
            "stand_ins": _words(models.get("stand_ins")),
            "not_inspectable": {
                k: v.text()
                for k, v in (models.get("not_inspectable") or At({})).entries(_word, MAX_MODELS).items()
            },
        },
    }


def differences(one: dict[str, Any], other: dict[str, Any], limit: int = 5) -> list[str]:
    """Where two catalog documents differ: option keys, then the other parts, at most `limit`."""
    found = [
        f"option {k}"
        for k in sorted(set(one["options"]) | set(other["options"]))
        if one["options"].get(k) != other["options"].get(k)
    ]
    found += [f"models.{k}" for k in sorted(one["models"]) if one["models"][k] != other["models"].get(k)]
    found += ["vllm_version"] if one["vllm_version"] != other["vllm_version"] else []
    return found[:limit]


def _key(at: At) -> str:
    return at.matching(KEY, "an option's name (snake_case)", 81)


def _word(at: At) -> str:
    return at.matching(WORD, "a plain name", 121)


def _words(at: At | None) -> list[str]:
    return [_word(item) for item in at.items(MAX_MODELS)] if at is not None else []


def _flags(key: str, at: At | None) -> list[str]:
    """An option's flags: each one of its key's own (never another option's, never a value)."""
    if at is None:
        return []
    flags = [item.name(128) for item in at.items(8)]
    mine = own_flags(key)
    for flag in flags:
        if flag not in mine:
            raise BadAnswer(
                at.where, f"{flag[:80]!r} is not a flag of {key} (its own: {', '.join(sorted(mine))})"
            )
    return flags


def _option(key: str, at: At) -> dict[str, Any]:
    flags = _flags(key, at.field("flags"))
    if not flags:
        raise BadAnswer(at.where, "has no flag")
    out: dict[str, Any] = {"flags": flags, "kind": at.field("kind").one_of(*KINDS)}
    negative = _flags(key, at.get("negative"))
    if negative:
        out["negative"] = negative
    if at.get("short") is not None:
        out["short"] = [_short(item) for item in at.field("short").items(4)]
    if at.get("type") is not None:
        out["type"] = at.field("type").one_of(*TYPES)
    nargs = at.get("nargs")
    if nargs is not None:
        out["nargs"] = nargs.integer(0, 64) if isinstance(nargs.value, int) else nargs.one_of("+", "*", "?")
    if at.get("choices") is not None:
        out["choices"] = [item.name(MAX_TEXT) for item in at.field("choices").items(1000)]
    if at.get("deprecated") is not None:
        out["deprecated"] = at.field("deprecated").text(4096)
    bounds = at.get("bounds")
    if bounds is not None:
        ends = bounds.entries(lambda k: k.one_of("gt", "ge", "lt", "le"), 4)
        out["bounds"] = {k: _bound(v) for k, v in ends.items()}
    return out


def _short(at: At) -> str:
    return at.matching(SHORT, "a short option", 5)


def _bound(at: At) -> int | float:
    if isinstance(at.value, int) and not isinstance(at.value, bool):
        return at.integer(-(1 << 63), 1 << 63)
    return at.number(-1e300, 1e300)


TRAIT_FLAGS = ("generate", "pooling", "hybrid", "attention_free", "inner_state", "mamba_hook")


def _traits(at: At) -> dict[str, Any]:
    out: dict[str, Any] = {k: at.field(k).flag() for k in TRAIT_FLAGS}
    out["attn_type"] = _word(at.field("attn_type"))
    out["seq_pooling"] = _word(at.field("seq_pooling"))
    out["tok_pooling"] = _word(at.field("tok_pooling"))
    out["config_hook"] = at.maybe("config_hook", _word)
    out["mamba_prefix_caching"] = at.maybe("mamba_prefix_caching", At.flag)
    return out
