"""The operator's cache ($XDG_CACHE_HOME/spark-launch): what was learned from the nodes.

- `catalogs/`: the flag catalog (flags, model traits) of a vLLM build without a committed
  one, generated on the nodes by their own vLLM; keyed by the build's version and the
  fingerprint of its files (a venv) or its image id (docker), so a rebuilt install under
  the same version is learned again. What the nodes said: read strictly again when it is
  read back (`core.answers.catalog_answer`), a catalog that does not pass counting as absent.
- `models/`: the model's small files read from the head (config.json, whether modules.json
  is there) for a spec whose model is not readable here; keyed by the head and the path.
  `plan` plans offline with them, and `check` compares every node's config.json to them.

A file that cannot be read back whole counts as absent: the cache only saves work. The
folder is XDG's on every system (macOS included), as the runbooks name it, rather than
platformdirs' folder per operating system.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from hashlib import sha256
from pathlib import Path
from typing import Any

from launcher.core.vllm.catalog import Catalog, catalog_from_dict
from launcher.core.vllm.models import ModelFiles


def root() -> Path:
    """The cache directory: $XDG_CACHE_HOME/spark-launch, else ~/.cache/spark-launch."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "spark-launch"


def _write(path: Path, data: Any) -> None:
    """Atomically (a reader never sees half a file); best effort (a read-only home is no error)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data))
        tmp.replace(path)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _safe(text: str) -> str:
    """A version or fingerprint as part of a file name (PEP 440 versions already are)."""
    return "".join(c if c.isalnum() or c in ".+-_" else "_" for c in text)[:120]


def catalog_file(version: str, build: str) -> Path:
    """Where the catalog learned from vLLM `version` with files `build` is kept."""
    return root() / "catalogs" / f"vllm-{_safe(version)}--{_safe(build)}.json"


def save_catalog(version: str, build: str, data: dict[str, Any], learned: dict[str, Any]) -> None:
    """Keep a learned catalog (the generator's document) and how it was learned."""
    _write(catalog_file(version, build), {"learned": {**learned, "at": time.time()}, "catalog": data})


def learned_catalog(version: str, build: str | None = None) -> tuple[Catalog, dict[str, Any]] | None:
    """A catalog learned earlier for `version` (and that build; without one, the newest learned),
    with how it was learned; None when there is none."""
    from launcher.core.answers.catalog_answer import catalog_document  # a build without a committed catalog
    from launcher.core.answers.read import BadAnswer

    folder = root() / "catalogs"
    if build is not None:
        paths = [catalog_file(version, build)]
    else:
        paths = sorted(folder.glob(f"vllm-{_safe(version)}--*.json"), key=_mtime, reverse=True)
    for path in paths:
        found = _read(path)
        try:
            learned = dict(found["learned"])
            return catalog_from_dict(catalog_document(found["catalog"]), _whence(learned)), learned
        except (TypeError, KeyError, ValueError, AttributeError, BadAnswer):
            continue
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _whence(learned: dict[str, Any]) -> str:
    nodes = learned.get("nodes")
    names = ", ".join(map(str, nodes)) if isinstance(nodes, list) and nodes else learned.get("node", "?")
    return f"learned from {names}'s own vLLM {learned.get('version', '?')}"


def model_file(head: str, path: str) -> Path:
    """Where the model files read from `head` (its ssh target) at `path` are kept."""
    key = sha256(json.dumps([head, path]).encode()).hexdigest()[:24]
    return root() / "models" / f"{key}.json"


def save_model_files(head: str, files: ModelFiles) -> None:
    """Keep the model files read from the head."""
    data = {
        "head": head,
        "node": files.node,
        "path": files.path,
        "config": files.config,
        "sentence_transformers": files.sentence_transformers,
        "sha256": files.sha256,
        "weight_bytes": files.weight_bytes,
        "at": time.time(),
    }
    _write(model_file(head, files.path), data)


def cached_model_files(head: str, path: str) -> ModelFiles | None:
    """The model files read from `head` earlier, or None."""
    found = _read(model_file(head, path))
    if not isinstance(found, dict) or found.get("head") != head or found.get("path") != path:
        return None
    if not isinstance(found.get("config"), dict):
        return None
    return ModelFiles(
        path,
        found["config"],
        bool(found.get("sentence_transformers")),
        str(found.get("node") or head),
        found.get("sha256") if isinstance(found.get("sha256"), str) else None,
        float(found.get("at") or 0.0) or None,
        _bytes(found.get("weight_bytes")),
    )


def _bytes(value: object) -> int | None:
    """A size kept in the cache, or None when it is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
