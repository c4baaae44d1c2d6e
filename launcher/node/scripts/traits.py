"""vLLM's own facts about each model architecture, read from the installed package's registry.

A library of the catalog script (learn_catalog.py), run under a vLLM install's own python
(standard library and vLLM only). For every architecture in vLLM's model registry it records
the class traits that decide a derived setting (hybrid, attention-free, pooling, the attention
type, the per-architecture config hook), as vLLM's own `_ModelInfo.from_model_cls` reads them.
It also records the release's MLA model types and speculative methods.

Importing a model module can need packages that only its multimodal processor uses
(torchvision, timm, ...). When such a package is absent, an inert stand-in is imported
instead: class traits are attributes of vLLM's own classes and do not depend on it.
Architectures whose module still cannot be imported are listed with the reason.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import re
import sys
import textwrap
import types
import typing
from dataclasses import asdict
from typing import Any

# Packages only multimodal processors and optional back ends import at module level.
STAND_INS = ("torchvision", "torchaudio", "timm", "terratorch", "decord", "librosa", "soundfile")

# _ModelInfo field -> catalog key. A release that drops one of these fails loudly.
TRAIT_FIELDS = {
    "is_text_generation_model": "generate",
    "is_pooling_model": "pooling",
    "attn_type": "attn_type",
    "is_hybrid": "hybrid",
    "is_attention_free": "attention_free",
    "has_inner_state": "inner_state",
    "default_seq_pooling_type": "seq_pooling",
    "default_tok_pooling_type": "tok_pooling",
}
# Fields some releases have: null where the release has none (0.33 dropped
# supports_mamba_prefix_caching: every mamba model may use prefix caching there).
OPTIONAL_FIELDS = {"supports_mamba_prefix_caching": "mamba_prefix_caching"}


def _inert_attribute(_: Any, name: str) -> Any:
    """Any plain attribute of a stand-in is another stand-in (dunders stay real lookups)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return _Inert


def _nothing(_: Any) -> Any:
    return iter(())


class _InertType(type):
    """Class-level reads on a stand-in (T.InterpolationMode.BICUBIC) give another stand-in."""

    __getattr__ = _inert_attribute
    __iter__ = _nothing


class _Inert(metaclass=_InertType):
    """Anything a module does with a stand-in package at import time: call, subclass, read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    __getattr__ = _inert_attribute
    __iter__ = _nothing


class _InertModule(types.ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", maxsplit=1)[0] in self.names:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _InertModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__version__ = "0.0.0"  # type: ignore[attr-defined]


def install_stand_ins() -> list[str]:
    """Stand in for the absent optional packages; returns their names."""
    absent = tuple(n for n in STAND_INS if importlib.util.find_spec(n) is None)
    if absent:
        sys.meta_path.append(_StandInFinder(absent))
    return list(absent)


def architectures() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Traits of every registered architecture, and the ones that cannot be imported here."""
    from vllm.model_executor.models.config import MODELS_CONFIG_MAP, MambaModelConfig
    from vllm.model_executor.models.registry import ModelRegistry, _ModelInfo

    traits: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for arch, registered in sorted(ModelRegistry.models.items()):
        try:
            info = asdict(_ModelInfo.from_model_cls(registered.load_model_cls()))
        except Exception as exc:  # a module that needs a CUDA extension, say
            failed[arch] = _reason(exc)
            continue
        entry = {key: info[field] for field, key in TRAIT_FIELDS.items()}
        entry.update({key: info.get(field) for field, key in OPTIONAL_FIELDS.items()})
        hook = MODELS_CONFIG_MAP.get(arch)
        entry["config_hook"] = hook.__name__ if hook is not None else None
        # vLLM runs MambaModelConfig for hybrid models and for those whose hook is one.
        entry["mamba_hook"] = hook is not None and issubclass(hook, MambaModelConfig)
        traits[arch] = entry
    return traits, failed


def _reason(exc: Exception) -> str:
    """The first line of an import failure, without this machine's paths."""
    text = re.sub(r"\s*\(?/[^\s)]*\)?", "", str(exc).splitlines()[0] if str(exc) else "")
    return f"{type(exc).__name__}: {text[:160]}"


def mla_model_types() -> list[str]:
    """The model types vLLM treats as MLA when kv_lora_rank is set (a tuple in its source)."""
    from vllm.transformers_utils import model_arch_config_convertor as convertor

    source = textwrap.dedent(inspect.getsource(convertor.ModelArchConfigConvertorBase.is_deepseek_mla))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In):
            values = node.comparators[0]
            if isinstance(values, ast.Tuple) and all(isinstance(e, ast.Constant) for e in values.elts):
                return sorted(str(e.value) for e in values.elts if isinstance(e, ast.Constant))
    raise SystemExit("traits.py: is_deepseek_mla has no literal tuple of model types any more")


def _literal_values(kind: Any) -> list[str]:
    """Every string a (nested) typing.Literal accepts."""
    out: list[str] = []
    for arg in typing.get_args(kind):
        out += _literal_values(arg) if typing.get_args(arg) else [str(arg)]
    return out


def speculative_methods() -> dict[str, list[str]]:
    """The `method` values of --speculative-config, and which of them are MTP."""
    from vllm.config import speculative

    return {
        "methods": sorted(set(_literal_values(speculative.SpeculativeMethod))),
        "mtp": sorted(set(_literal_values(speculative.MTPModelTypes))),
    }


def models() -> dict[str, Any]:
    """The catalog's `models` section."""
    stand_ins = install_stand_ins()
    traits, failed = architectures()
    return {
        "stand_ins": stand_ins,
        "mla_model_types": mla_model_types(),
        "speculative": speculative_methods(),
        "not_inspectable": failed,
        "architectures": traits,
    }
