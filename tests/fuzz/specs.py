"""A seeded generator of malformed and hostile specs: mutations of the configs/ examples.

Each spec is the bytes of a file and the names of the mutations that made it. Data-level
mutations (deleted, retyped and misspelt keys, extreme numbers, hostile strings in every
field, odd node lists, planted secrets) are applied to a loaded example; text-level ones
(alias bombs, recursive aliases, deep nesting, control bytes, bytes that are not UTF-8,
tags, dates, huge numbers, truncation, noise) to its YAML text.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from launcher.catalogs import load_catalog
from tests.fuzz.yaml_text import TEXT_MUTATIONS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "configs").glob("*.yaml"))]
OPTIONS = sorted(load_catalog("0.33.0").options.items())
# Names the launcher's environment gives a planted value while the fuzzer runs.
SECRET_NAMES = ("HF_TOKEN", "VLLM_API_KEY", "FUZZ_SECRET_TOKEN")

HOSTILE = [
    "--privileged",
    "-oProxyCommand=touch /tmp/pwned",
    "-",
    "--",
    "a\nb",
    "a\r\nb",
    "tab\there",
    "\x1b[31mred\x1b[0m",
    "nul\x00byte",
    "bell\x07",
    "del\x7f",
    "c1\x9b",
    "$(touch /tmp/pwned)",
    "`id`",
    "'; rm -rf ~ #",
    'quote"s',
    "back\\slash",
    "\u202eevil",
    "zero\u200bwidth",
    "line\u2028sep",
    "é🙂",
    "",
    " ",
    "a b",
    "~root/x",
    "/a:/b:rw",
    "a=b",
    "{{7*7}}",
    "../../etc/passwd",
    "/",
    "x" * 300,
    "fe80::1%eth 0",
    "fe80::1%eth0",
    "::",
    "0.0.0.0",
    "10.0.0.1",
    "user@host:99999",
    "user@-host",
    "0.33.0+" + "x" * 300,
    "v0.33",
    "0.33.0",
    "0.32.0",
    "1e999",
    "yes",
    "null",
]
ODD = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2,
    3,
    65535,
    65536,
    2**31,
    2**63,
    2**64,
    10**30,
    -(10**30),
    0.5,
    1.5,
    -0.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    [],
    {},
    [1, 2],
    ["--x"],
    {"a": 1},
    {"method": "mtp", "num_speculative_tokens": 0},
    "",
    "0",
    "auto",
    "128k",
    "true",
]
Data = dict[str, Any]


def generate(rng: random.Random) -> tuple[bytes, list[str]]:
    """One spec file's bytes, and the mutations applied, in order."""
    data: Any = copy.deepcopy(rng.choice(EXAMPLES))
    applied = []
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4])):
        name = rng.choice(list(DATA_MUTATIONS))
        data = DATA_MUTATIONS[name](rng, data)
        applied.append(name)
    flow = rng.random() < 0.2
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=rng.random() < 0.5, default_flow_style=flow)
    for _ in range(rng.choice([0, 0, 0, 1, 1, 2])):
        name = rng.choice(list(TEXT_MUTATIONS))
        text = TEXT_MUTATIONS[name](rng, text)
        applied.append(name)
    raw = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.04:
        at = rng.randrange(len(raw) + 1)
        raw = raw[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xfe\xff"]) + raw[at:]
        applied.append("bad_utf8")
    return raw, applied or ["none"]


# -- data-level ------------------------------------------------------------------------
def _paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in `data`, parents before children."""
    out = [path] if path else []
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*path, i))
    return out


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return data


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _delete(rng: random.Random, data: Any) -> Any:
    paths = [p for p in _paths(data) if isinstance(_get(data, p[:-1]), dict)]
    if paths:
        path = rng.choice(paths)
        del _get(data, path[:-1])[path[-1]]
    return data


def _retype(rng: random.Random, data: Any) -> Any:
    paths = _paths(data)
    return _set(data, rng.choice(paths), copy.deepcopy(rng.choice(ODD + HOSTILE))) if paths else data


def _misspell(rng: random.Random, data: Any) -> Any:
    paths = [p for p in _paths(data) if isinstance(_get(data, p[:-1]), dict) and isinstance(p[-1], str)]
    if not paths:
        return data
    path = rng.choice(paths)
    parent, key = _get(data, path[:-1]), path[-1]
    i = rng.randrange(len(key) + 1)
    typo = rng.choice([key[:i] + key[i + 1 :], key[:i] + rng.choice("aeiosx_-") + key[i:], key.upper()])
    parent[typo or "x"] = parent.pop(key)
    return data


def _unknown_key(rng: random.Random, data: Any) -> Any:
    dicts = [()] + [p for p in _paths(data) if isinstance(_get(data, p), dict)]
    parent = _get(data, rng.choice(dicts)) if isinstance(data, dict) else None
    if isinstance(parent, dict):
        parent[rng.choice(["gpu", "nodes2", "servee", "a\nb", "--x", "\x1b[2J", "é", "1"])] = rng.choice(ODD)
    return data


def _hostile(rng: random.Random, data: Any) -> Any:
    strings = [p for p in _paths(data) if isinstance(_get(data, p), str)]
    return _set(data, rng.choice(strings), rng.choice(HOSTILE)) if strings else data


def _serve_option(rng: random.Random, data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("serve"), dict):
        key, option = rng.choice(OPTIONS)
        value = _plausible(rng, option.type, option.kind) if rng.random() < 0.6 else rng.choice(ODD + HOSTILE)
        data["serve"][key] = copy.deepcopy(value)
    return data


def _plausible(rng: random.Random, kind: str | None, flag_kind: str) -> Any:
    if flag_kind != "value":
        return rng.choice([True, False])
    return {
        "int": rng.choice([1, 2, 16, 4096, 0, -5]),
        "float": rng.choice([0.5, 0.9, 1, 2.5]),
        "size": rng.choice([4096, "128k", "1.5M", "auto"]),
        "json": rng.choice([{"a": 1}, [1, 2], {"k": {"n": [True, None]}}, "{}"]),
    }.get(kind or "", rng.choice(["auto", "x", "/tmp/f", "a b"]))


def _extreme(rng: random.Random, data: Any) -> Any:
    keys = ["tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "port", "master_port"]
    keys += ["max_model_len", "mamba_block_size", "block_size", "max_num_seqs", "gpu_memory_utilization"]
    value = copy.deepcopy(rng.choice(ODD))
    if (
        isinstance(data, dict)
        and rng.random() < 0.2
        and isinstance(data.get("nodes"), list)
        and data["nodes"]
    ):
        node = rng.choice(data["nodes"])
        if isinstance(node, dict):
            node["gpus"] = value
    elif isinstance(data, dict) and isinstance(data.get("serve"), dict):
        data["serve"][rng.choice(keys)] = value
    return data


def _nodes(rng: random.Random, data: Any) -> Any:
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        return data
    nodes = data["nodes"]
    choice = rng.randrange(5)
    if choice == 0:
        data["nodes"] = []
    elif choice == 1 and nodes:
        nodes.append(copy.deepcopy(nodes[0]))
    elif choice == 2 and nodes and isinstance(nodes[-1], dict):
        template = nodes[-1]
        for i in range(rng.choice([3, 8, 40])):
            nodes.append(
                {**template, "name": f"n{i}", "ssh": f"n{i}", "address": f"10.1.{i // 250}.{i % 250 + 1}"}
            )
    elif choice == 3:
        nodes.append(rng.choice(ODD + HOSTILE))
    else:
        data["nodes"] = rng.choice(ODD + HOSTILE)
    return data


def _docker(rng: random.Random, data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("vllm"), dict):
        data["vllm"]["runtime"] = "docker"
        data["vllm"]["image"] = rng.choice(["nvcr.io/nvidia/vllm:26.05-py3", *HOSTILE[:8], None])
    return data


def _secrets(rng: random.Random, data: Any) -> Any:
    if isinstance(data, dict):
        data["secrets"] = rng.sample(SECRET_NAMES, rng.randrange(1, len(SECRET_NAMES) + 1))
        if rng.random() < 0.2 and isinstance(data.get("env"), dict):
            data["env"][data["secrets"][0]] = "also-in-env"
    return data


DATA_MUTATIONS: dict[str, Callable[[random.Random, Any], Any]] = {
    "delete": _delete,
    "retype": _retype,
    "misspell": _misspell,
    "unknown_key": _unknown_key,
    "hostile": _hostile,
    "hostile2": _hostile,
    "serve_option": _serve_option,
    "extreme": _extreme,
    "nodes": _nodes,
    "docker": _docker,
    "secrets": _secrets,
}
