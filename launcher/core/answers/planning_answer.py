"""The answer of the planning script: the model's small files and the vLLM build, as the head
holds them. Pure.

Read into plain mappings of checked values (commands.planning keeps them in the operator's
cache as they are): a config.json is passed on as text and parsed by the plan, which says
when it is not a JSON object.
"""

from __future__ import annotations

from typing import Any

from launcher.core.answers.read import MAX_BYTES, MAX_PATH, At, Refused
from launcher.core.answers.run_answer import failed

MAX_CONFIG = 16 << 20  # as the planning script reads a config.json


def planned(raw: object) -> dict[str, Any]:
    """What the head answered: "model" and/or "vllm", as it was asked."""
    at = At(raw)
    error = failed(at)
    if error is not None:
        raise Refused(error)
    out: dict[str, Any] = {}
    model = at.get("model")
    if model is not None:
        out["model"] = _model(model)
    build = at.get("vllm")
    if build is not None:
        out["vllm"] = _build(build)
    return out


def _model(at: At) -> dict[str, Any]:
    return {
        "path": at.field("path").name(MAX_PATH),
        "exists": at.field("exists").flag(),
        "modules": at.field("modules").flag(),
        "config": at.maybe("config", lambda a: a.content(MAX_CONFIG)),
        "sha256": at.maybe("sha256", At.hexdigest),
        "weight_bytes": at.maybe("weight_bytes", lambda a: a.integer(0, MAX_BYTES)),
        "error": at.maybe("error", At.text),
    }


def _build(at: At) -> dict[str, Any]:
    return {
        "version": at.maybe("version", lambda a: a.name(128)),
        "distribution": at.maybe("distribution", lambda a: a.name(128)),
        "build": at.maybe("build", At.name),
        "python": at.maybe("python", At.flag),
        "error": at.maybe("error", At.text),
    }
