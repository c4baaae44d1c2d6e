"""What one vLLM release's `vllm serve` accepts, as values. Pure.

The data comes from `launcher/catalogs/` (generated from each release's real parser);
`catalog_from_dict` turns one such document into a Catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def parse_version(text: str) -> tuple[int, ...]:
    """`0.33.0`, `0.33.0+cpu` or `v0.33` as a comparable tuple; ValueError otherwise."""
    core = text.strip().lstrip("v").split("+")[0]
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a release number: {text!r}")
    return tuple(int(p) for p in parts) + (0,) * (3 - len(parts))


@dataclass(frozen=True)
class Option:
    """One `vllm serve` option: its flag, its negative forms, what value it takes."""

    key: str
    flags: tuple[str, ...]
    kind: str  # "bool" (--x / --no-x), "flag" (store_true), "value"
    negative: tuple[str, ...] = ()
    type: str | None = None  # int, float, size, json, str
    nargs: str | int | None = None
    choices: tuple[str, ...] | None = None
    deprecated: str | None = None

    @property
    def flag(self) -> str:
        """The canonical flag, e.g. --enable-prefix-caching."""
        return self.flags[0]

    @property
    def many(self) -> bool:
        """True when the option takes a list of values (nargs + or *)."""
        return self.nargs in ("+", "*")


@dataclass(frozen=True)
class Catalog:
    """Every `vllm serve` option of one vLLM release, keyed by its snake_case name."""

    version: str
    options: dict[str, Option]

    def get(self, key: str) -> Option | None:
        """The option named `key`, or None."""
        return self.options.get(key)

    def is_live(self, key: str) -> bool:
        """True when the option exists and is not a deprecated no-op."""
        option = self.options.get(key)
        return option is not None and option.deprecated is None


def catalog_from_dict(data: dict[str, Any]) -> Catalog:
    """A Catalog from the JSON document `scripts/gen_catalog.py` writes."""
    return Catalog(data["vllm_version"], {k: _option(k, v) for k, v in data["options"].items()})


def _option(key: str, raw: dict[str, Any]) -> Option:
    choices = raw.get("choices")
    return Option(
        key=key,
        flags=tuple(raw["flags"]),
        kind=raw["kind"],
        negative=tuple(raw.get("negative", ())),
        type=raw.get("type"),
        nargs=raw.get("nargs"),
        choices=tuple(choices) if choices is not None else None,
        deprecated=raw.get("deprecated"),
    )
