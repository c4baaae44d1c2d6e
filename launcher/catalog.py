"""What each supported vLLM release's `vllm serve` accepts: data generated from its parser.

The JSON files under `catalogs/` are written by `scripts/gen_catalog.py` from the real
parser of each release (`make catalogs`) and checked against it by the conformance tier.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import SparkLaunchError

CATALOG_DIR = Path(__file__).parent / "catalogs"


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


def known_versions() -> list[str]:
    """The vLLM releases with a committed catalog, oldest first."""
    names = (p.name.removeprefix("vllm-").removesuffix(".json") for p in CATALOG_DIR.glob("vllm-*.json"))
    return sorted(names, key=parse_version)


@functools.cache
def load_catalog(version: str) -> Catalog:
    """The catalog of a known release; a SparkLaunchError naming the known ones otherwise."""
    path = CATALOG_DIR / f"vllm-{version}.json"
    if not path.is_file():
        raise SparkLaunchError(
            f"no flag catalog for vLLM {version}; known: {', '.join(known_versions())}",
            "set vllm.flags_from to the nearest known release to go on at your own risk",
        )
    data = json.loads(path.read_text())
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
