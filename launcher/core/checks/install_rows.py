"""Rows of the vLLM install: present, and the same release and build on every node. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.checks.check_report import Row, each, same
from launcher.core.spec.sections import Spec
from launcher.core.vllm.releases import Release, same_release
from launcher.core.vllm.sources import Sources


def vllm_rows(spec: Spec, facts: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """The runtime: present, and the same release, build, Python and torch everywhere."""
    v = {n: f.get("vllm", {}) for n, f in facts.items()}
    if spec.vllm.runtime == "docker":
        return image_rows(str(spec.vllm.image), v)
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
    # A version written without a local label (0.32.0) is matched by any build of it (0.32.0+cpu,
    # 0.33.0+cu130): the build rows below tell builds apart.
    release_ok = all(same_release(spec.vllm.version, x) for x in versions.values())
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


def _files_row(v: Mapping[str, Mapping[str, Any]]) -> Row:
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


def image_rows(image: str, v: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """The image on every node, and the same build: by image id, or by a repo digest they share.

    Ids differ where storage drivers differ; images loaded from an archive have no repo
    digest. Either matching is enough, and the rows say which one did.
    """
    ids = {n: x.get("image_id") for n, x in v.items()}
    held = all(ids.values())
    present = Row(
        "vllm",
        f"image {image} present",
        {
            n: i[7:19] if i else f"NO: {x.get('error', '?')}"
            for (n, i), x in zip(ids.items(), v.values(), strict=True)
        },
        held,
        None
        if held
        else f"copy the head's image to the others: spark-launch sync images SPEC (or docker pull {image})",
    )
    if not present.ok:
        return [present]
    digests = {n: set(x.get("repo_digests") or []) for n, x in v.items()}
    same_id = len(set(ids.values())) == 1
    shared = set.intersection(*digests.values())
    ok = same_id or bool(shared)
    differ = (
        "the nodes hold different builds under that name: spark-launch sync images SPEC copies the head's"
    )
    id_row = Row(
        "vllm",
        "image id",
        {n: _short(i) for n, i in ids.items()},
        ok,
        None
        if same_id
        else ("differs (another storage driver?), but a repo digest matches" if ok else differ),
    )
    shown = {n: ", ".join(sorted(d)) or "(none)" for n, d in digests.items()}
    if shared:
        digest_hint = None
    elif not any(digests.values()):
        digest_hint = (
            "no repo digests (loaded from an archive or built here): the image id matched" if ok else None
        )
    else:
        digest_hint = "no repo digest in common, but the image id matches" if ok else differ
    return [present, id_row, Row("vllm", "image repo digest", shown, ok, digest_hint)]


def image_release_row(spec: Spec, resolved: Mapping[str, Mapping[str, Any]]) -> Row:
    """The vLLM release inside the image, as its own Python reports it (from the probe)."""
    versions = {n: r.get("vllm_version") for n, r in resolved.items()}
    ok = all(same_release(spec.vllm.version, x) for x in versions.values())
    return Row(
        "vllm",
        "vllm version (in the image)",
        versions,
        ok,
        None if ok else f"the image must hold vLLM {spec.vllm.version} (or fix vllm.version)",
    )


def _short(image_id: str | None) -> str:
    """An image id as docker shows it: 12 hex digits."""
    return (image_id or "").removeprefix("sha256:")[:12]


def rules_row(head: str, release: Release) -> Row:
    """Whose derived-settings rules the plan applied, and whether they were reviewed for this
    build (a supported release as published) or not (a nightly, a vendor's build: warned)."""
    if release.reviewed:
        return Row("vllm", "derived-settings rules", {head: f"{release.rules_of}'s, reviewed for it"}, True)
    value = f"{release.rules_of}'s, not reviewed for {release.version}"
    return Row("vllm", "derived-settings rules", {head: value}, False, release.why, level="warn")


def catalog_rows(head: str, sources: Sources | None) -> list[Row]:
    """Where the flags the plan was checked against came from, for a build without a committed
    catalog: learned from the head's own vLLM now, or earlier (the operator's cache)."""
    if sources is None or sources.learned is None:
        return []
    return [Row("vllm", "flag catalog (this build's own)", {head: sources.learned}, True)]
