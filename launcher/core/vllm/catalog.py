"""What one vLLM release's `vllm serve` accepts and knows about models, as values. Pure.

The data comes from `launcher/catalogs/` (generated from each release's real parser and
model registry); `catalog_from_dict` turns one such document into a Catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Bounds:
    """The range a numeric option's value must keep, as its vLLM config field declares it."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def holds(self, value: float) -> bool:
        """True when `value` is inside the range."""
        return not (
            (self.gt is not None and value <= self.gt)
            or (self.ge is not None and value < self.ge)
            or (self.lt is not None and value >= self.lt)
            or (self.le is not None and value > self.le)
        )

    @property
    def text(self) -> str:
        """The range as people write it: (0, 1], [1, 65535], > 0, >= 1."""
        low, high = _first(("(", self.gt), ("[", self.ge)), _first((")", self.lt), ("]", self.le))
        if low and high:
            return f"{low[0]}{_num(low[1])}, {_num(high[1])}{high[0]}"
        if low:
            return f"{'>' if low[0] == '(' else '>='} {_num(low[1])}"
        return f"{'<' if high and high[0] == ')' else '<='} {_num(high[1] if high else None)}"


def _first(*ends: tuple[str, float | None]) -> tuple[str, float] | None:
    """The first end of a range that is set, with its bracket."""
    return next(((mark, value) for mark, value in ends if value is not None), None)


def _num(value: float | None) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True, slots=True)
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
    bounds: Bounds | None = None  # from the release's config class (vLLM checks it there, not in the parser)

    @property
    def flag(self) -> str:
        """The canonical flag, e.g. --enable-prefix-caching."""
        return self.flags[0]

    @property
    def many(self) -> bool:
        """True when the option takes a list of values (nargs + or *)."""
        return self.nargs in ("+", "*")


@dataclass(frozen=True, slots=True)
class ModelTraits:
    """vLLM's own facts about one architecture: its registry's class traits (`_ModelInfo`)."""

    generate: bool  # a text generation model (runner "generate")
    pooling: bool  # a pooling model (runner "pooling" wins when both are true)
    attn_type: str  # decoder, encoder_only, attention_free, ...
    hybrid: bool  # IsHybrid: mamba/linear-attention layers mixed with attention
    attention_free: bool  # IsAttentionFree: no attention layer at all (Mamba, Mamba2)
    inner_state: bool  # HasInnerState: a recurrent state per sequence
    mamba_prefix_caching: bool | None  # SupportsMambaPrefixCaching (None: no such trait, 0.33)
    seq_pooling: str  # the default sequence pooling type (CLS, LAST, MEAN)
    tok_pooling: str  # the default token pooling type
    config_hook: str | None  # its MODELS_CONFIG_MAP entry, run on every config
    mamba_hook: bool  # that hook is MambaModelConfig: vLLM derives the mamba cache mode


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every `vllm serve` option of one vLLM release, keyed by its snake_case name, and its models."""

    version: str
    options: Mapping[str, Option]
    models: Mapping[str, ModelTraits] = field(default_factory=dict)
    mla_model_types: frozenset[str] = frozenset()
    speculative_methods: tuple[str, ...] = ()
    source: str | None = None  # where it came from when not committed (learned from a node's vLLM)

    def get(self, key: str) -> Option | None:
        """The option named `key`, or None."""
        return self.options.get(key)

    def is_live(self, key: str) -> bool:
        """True when the option exists and is not a deprecated no-op."""
        option = self.options.get(key)
        return option is not None and option.deprecated is None


class Entries(Mapping[str, T]):
    """A catalog's table, each entry built from its JSON on first use: a plan reads a few
    dozen options and one architecture of hundreds, and a cold start pays for no more."""

    def __init__(self, raw: dict[str, Any], build: Callable[[str, Any], T]) -> None:
        self._raw, self._build = raw, build
        self._built: dict[str, T] = {}

    def __getitem__(self, key: str) -> T:
        if key not in self._built:
            self._built[key] = self._build(key, self._raw[key])  # KeyError: no such entry
        return self._built[key]

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def catalog_from_dict(data: dict[str, Any], source: str | None = None) -> Catalog:
    """A Catalog from the JSON document `scripts/gen_catalog.py` writes (`source`: whence, when
    it is not a committed one)."""
    models = data.get("models", {})
    return Catalog(
        data["vllm_version"],
        Entries(data["options"], _option),
        Entries(models.get("architectures", {}), lambda _, traits: ModelTraits(**traits)),
        frozenset(models.get("mla_model_types", ())),
        tuple(models.get("speculative", {}).get("methods", ())),
        source,
    )


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
        bounds=Bounds(**raw["bounds"]) if raw.get("bounds") else None,
    )
