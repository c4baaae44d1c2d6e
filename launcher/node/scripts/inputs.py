"""What a node's vLLM takes in besides its command line: engine variables, the model's small files.

Shared by the facts `check` compares and by the probe's cache key, so both look at the same
inputs; and the probe's cache keys themselves, computed alike by the probe (which saves an
answer) and by the facts script (which finds it without starting the probe at all).
"""

from __future__ import annotations

import hashlib
import json
import os
import re

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Variables vLLM (or torch, NCCL, Gloo, the HF hub) reads as configuration.
ENV_PREFIXES = ("VLLM_", "NCCL_", "GLOO_", "HF_", "CUDA_", "TORCH_", "OMP_", "PYTORCH_")
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD")
# Well-known token shapes: a copy of core/spec/secrets.py's (a test holds them equal).
TOKEN_SHAPES = (
    r"hf_[A-Za-z0-9]{30,}",
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
    r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    r"glpat-[A-Za-z0-9_-]{20,}",
    r"nvapi-[A-Za-z0-9_-]{20,}",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    r"xox[abposr]-[A-Za-z0-9-]{10,}",
    r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
)
TOKEN = re.compile("|".join(f"(?:{shape})" for shape in TOKEN_SHAPES))
# The model's files that decide its config and tokenizer (the weights are compared elsewhere).
CONFIG_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "generation_config.json",
    "chat_template.jinja",
)


def sha256_file(path: str) -> str:
    """The sha256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def engine_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The engine variables of `environ`, secret values (by name or by shape) replaced by a short hash."""
    out = {}
    for key, value in sorted(environ.items()):
        if key.startswith(ENV_PREFIXES):
            secret = any(word in key.upper() for word in SECRET_WORDS) or bool(TOKEN.search(value))
            out[key] = "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:12] if secret else value
    return out


def config_hashes(model: str) -> dict[str, str]:
    """The sha256 of each of the model's config and tokenizer files that exist."""
    return {
        name: sha256_file(os.path.join(model, name))
        for name in CONFIG_FILES
        if os.path.isfile(os.path.join(model, name))
    }


def python_identity(executable: str) -> list[Any]:
    """An interpreter as seen from outside it: where it really is, and its binary's stat (a
    reinstall, an upgrade or another interpreter behind the same venv changes one of them)."""
    real = os.path.realpath(executable)
    st = os.stat(real)
    return [real, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def installed_packages(site: str) -> list[list[Any]]:
    """Every distribution installed in `site` (its metadata directory's name, which holds the
    version, and that directory's inode and mtime: a reinstall makes a new one), and each .pth
    file: vLLM's answer depends on transformers, torch and the rest, not on its own files only."""
    out = []
    for entry in sorted(os.scandir(site), key=lambda e: e.name):
        if entry.name.endswith((".dist-info", ".egg-info", ".egg-link", ".pth")):
            st = entry.stat()
            out.append([entry.name, st.st_ino, st.st_mtime_ns])
    return out


def venv_probe_key(
    tag: str,
    python: list[Any],
    build: str,
    packages: list[list[Any]],
    argv: list[str],
    env: Mapping[str, str],
) -> str:
    """Everything that decides a venv `resolve` answer, hashed: this probe (its tag), the python,
    the vLLM build (its files), the other packages installed beside it, the argv, the engine
    variables, the model's config and tokenizer."""
    inputs = {
        "probe": tag,
        "python": python,
        "vllm": build,
        "packages": packages,
        "argv": argv,
        "env": engine_env(env),
        "model": config_hashes(argv[0]) if argv else {},
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def image_probe_key(tag: str, image_id: str, command: str, env: Mapping[str, str], model: str | None) -> str:
    """Everything that decides a docker `resolve` answer, hashed: this probe, the image by id, the
    probe's exact command line (argv, container options), the environment it is given (the
    container sees no other), the model's config files."""
    model_files = config_hashes(model) if model else {}
    inputs = {"probe": tag, "image": image_id, "command": command, "env": dict(env), "model": model_files}
    return "image-" + hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
