"""Rows of the vLLM install: present, and the same release and build on every node. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.catalog import parse_version
from launcher.core.checks.report import Row, each, same
from launcher.core.spec import Spec


def vllm_rows(spec: Spec, facts: Mapping[str, dict[str, Any]]) -> list[Row]:
    """The runtime: present, and the same release, build, Python and torch everywhere."""
    v = {n: f.get("vllm", {}) for n, f in facts.items()}
    if spec.vllm.runtime == "docker":
        ids = {n: x.get("image_id") for n, x in v.items()}
        return [
            each(
                "vllm",
                f"image {spec.vllm.image} present",
                ids,
                f"docker pull {spec.vllm.image} on every node (docker must be installed)",
            ),
            same(
                "vllm",
                "image id",
                {n: (i or "")[:19] for n, i in ids.items()},
                "the nodes hold different builds under that tag: pull the same digest everywhere",
            ),
        ]
    where = spec.vllm.venv
    rows = [
        each(
            "vllm",
            "vllm binary",
            {n: x.get("vllm_binary", False) for n, x in v.items()},
            f"install vLLM {spec.vllm.version} at {where} on every node (`{where}/bin/vllm` must exist)",
        )
    ]
    versions = {n: x.get("vllm_version") for n, x in v.items()}
    # A build's local label (0.32.0+cpu, 0.33.0+cu130) is not part of the release; the build
    # rows below tell builds apart.
    release_ok = all(_release(x) == parse_version(spec.vllm.version) for x in versions.values())
    row = same("vllm", "vllm version", versions, "")
    rows.append(
        Row(
            "vllm",
            "vllm version",
            versions,
            row.ok and release_ok,
            None
            if row.ok and release_ok
            else f"install the spec's vLLM {spec.vllm.version} on every node (or fix vllm.version)",
        )
    )
    rows.append(_files_row(v))
    for key, label in (
        ("vllm_build", "vllm build (files)"),
        ("vllm_commit", "vllm commit"),
        ("python_version", "python"),
        ("torch_version", "torch"),
    ):
        rows.append(
            same(
                "vllm",
                label,
                {n: x.get(key) for n, x in v.items()},
                "the nodes run different vLLM installs: install the same build from the same "
                "source on every node (a patched or rebuilt package counts)",
            )
        )
    return rows


def _files_row(v: Mapping[str, dict[str, Any]]) -> Row:
    """Whether each node's vLLM files are the ones its installer recorded (warns: a patched
    install that is the same everywhere still starts alike; the build row compares nodes)."""
    values, changed = {}, False
    for node, x in v.items():
        files = x.get("vllm_files") or {}
        odd = [*files.get("differ", []), *files.get("unknown", []), *files.get("missing", [])]
        changed = changed or bool(odd)
        values[node] = (
            f"{len(odd)} changed: {', '.join(odd[:3])}" if odd else f"as installed ({files.get('files', 0)})"
        )
    hint = "files differ from the install's RECORD: a patched or partly replaced vLLM; reinstall it"
    return Row("vllm", "vllm files vs RECORD", values, not changed, hint if changed else None, "warn")


def _release(version: Any) -> tuple[int, ...] | None:
    try:
        return parse_version(str(version))
    except ValueError:
        return None
