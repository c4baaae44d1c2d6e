"""The docker runtime's probe answer, cached on the node by everything that decides it.

The probe itself runs inside the image (a container started for it: `core.remote.probe_call`).
This script runs beside it, on the node: `lookup` says under which key its answer would be
cached (this probe's version, the image by id, the probe's exact command line: argv,
environment and container options, and the model's config and tokenizer files) and returns
the cached answer if there is one, so that an unchanged node answers without starting a
container. A new answer is kept under that key by the launcher (`core.remote.probe_save_call`).

    python3 - imageprobe DIR lookup REQUEST_JSON   # {"tag", "image", "command", "model"}
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

from launcher.node.scripts.common import emit, image_info, read_json, run_directory  # inlined when sent
from launcher.node.scripts.inputs import config_hashes  # inlined when sent

CACHE = os.path.expanduser("~/.spark-launch/cache/probe")  # core.remote.PROBE_CACHE


def key_of(request: dict[str, Any], image_id: str) -> str:
    """Everything that decides the answer, hashed."""
    inputs = {
        "probe": request["tag"],
        "image": image_id,
        "command": request["command"],
        "model": config_hashes(request["model"]) if request.get("model") else {},
    }
    return "image-" + hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def lookup(request: dict[str, Any]) -> None:
    """The key (none without the image) and the answer cached under it, if any."""
    image_id = image_info(request["image"]).get("image_id")
    if not image_id:
        return emit(ok=True, key=None, cached=None)
    key = key_of(request, image_id)
    cached = read_json(os.path.join(CACHE, key + ".json"))
    return emit(ok=True, key=key, cached=cached if isinstance(cached, dict) else None)


def main(argv: list[str]) -> None:
    """imageprobe DIR lookup REQUEST_JSON"""
    run_directory(argv)
    lookup(json.loads(argv[2]))


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
