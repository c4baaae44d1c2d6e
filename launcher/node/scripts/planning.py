"""What a plan made on another machine needs from the head: the model's small files, and
which vLLM build is installed (its version and the fingerprint of its files, or the image).

The launcher asks only for what it cannot read itself: the model's config.json when the
model lives on the nodes alone, the build's identity when its flag catalog must be learned
(or found again in the operator's cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

from .check_facts import site_packages, vllm_facts
from .common import WEIGHTS, emit, image_info, run_directory

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

MAX_CONFIG = 16 << 20  # as the launcher reads a local config.json: a few KiB, never whole beyond this


def model_files(path: str) -> dict[str, Any]:
    """config.json's text and sha256, and whether modules.json is there (a sentence-transformers model)."""
    out: dict[str, Any] = {
        "path": path,
        "exists": os.path.isdir(path),
        "modules": os.path.isfile(os.path.join(path, "modules.json")),
        "config": None,
    }
    config = os.path.join(path, "config.json")
    if not os.path.isfile(config):  # a FIFO or a device there would block
        return {**out, "error": f"no config.json in {path}"}
    size = os.path.getsize(config)
    if size > MAX_CONFIG:
        return {**out, "error": f"{config} is {size} bytes: not a model's config"}
    try:
        with open(config, "rb") as f:
            data = f.read(MAX_CONFIG + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return {**out, "error": f"cannot read {config}: {exc}"}
    return {
        **out,
        "config": text,
        "sha256": hashlib.sha256(data).hexdigest(),
        "weight_bytes": weight_bytes(path),
    }


def weight_bytes(path: str) -> int:
    """The size of the weight files at the top of the model directory (0: none there)."""
    total = 0
    try:
        for name in os.listdir(path):
            full = os.path.join(path, name)
            if name.endswith(WEIGHTS) and os.path.isfile(full):
                total += os.path.getsize(full)
    except OSError:  # unreadable: the plan then says it cannot size the KV cache
        return 0
    return total


def venv_build(venv: str) -> dict[str, Any]:
    """The venv's vLLM: version, distribution, the fingerprint of its files, its python."""
    facts = vllm_facts(venv)
    python = os.path.join(venv, "bin", "python")
    return {
        "version": facts.get("vllm_version"),
        "distribution": facts.get("vllm_distribution"),
        "build": facts.get("vllm_build"),
        "python": os.access(python, os.X_OK) and site_packages(venv) is not None,
    }


def image_build(image: str) -> dict[str, Any]:
    """The docker runtime: the image's id stands for the build."""
    info = image_info(image)
    return {"version": None, "build": info.get("image_id"), "error": info.get("error")}


def planning(directory: str, request: str) -> None:
    """Answer what the request asks for: {"model": PATH} and/or {"venv": DIR} or {"image": REF}."""
    ask = json.loads(request)
    answer: dict[str, Any] = {"ok": True}
    if ask.get("model"):
        answer["model"] = model_files(ask["model"])
    if ask.get("venv"):
        answer["vllm"] = venv_build(ask["venv"])
    elif ask.get("image"):
        answer["vllm"] = image_build(ask["image"])
    emit(**answer)


def main(argv: list[str]) -> None:
    """planning DIR REQUEST_JSON"""
    planning(run_directory(argv), argv[1])


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
