"""The bed's container image, made from local material only (no registry is reachable).

A Debian root from the distribution's own packages (debootstrap), plus the CPU vLLM venv
and the interpreter it points at, at the very same paths, written as a docker-archive
directory (manifest, config, one layer) that `docker load` takes. It is cached under
~/.cache/spark-launch/images by a key of everything that goes in it, so a second run
costs nothing and a changed venv or recipe builds a new one.

The image carries a C++ compiler and openssl: the vLLM CPU build compiles a helper at
its first request, and without them /health answers 200 while every completion fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import TestbedError
from testbed.layout import VLLM_VERSION

TAG = f"spark-launch-testbed/vllm-cpu:{VLLM_VERSION}"
RECIPE = 1  # bump when the way the image is made changes
# What the interpreter, torch and the vLLM CPU build load, plus the compiler and openssl.
PACKAGES = (
    "ca-certificates",
    "g++",
    "libbz2-1.0",
    "libexpat1",
    "libffi8",
    "libgomp1",
    "liblzma5",
    "libncursesw6",
    "libnuma1",
    "libreadline8",
    "libsqlite3-0",
    "libssl-dev",
    "libuuid1",
    "openssl",
    "procps",
    "zlib1g",
)
# Parts of the interpreter's prefix the venv never uses (it has its own site-packages).
PREFIX_EXCLUDES = ("lib/python3*/site-packages/*", "lib/python3*/test", "lib/python3*/idlelib")


@dataclass(frozen=True)
class Archive:
    """A built image: its docker-archive directory, tag and image id."""

    path: Path
    tag: str
    image_id: str
    layer: str  # the layer file, relative to path

    def members(self) -> list[str]:
        """The archive's files, in the order `docker load` reads them best."""
        return ["manifest.json", self.image_id.removeprefix("sha256:") + ".json", self.layer]


def cache_dir() -> Path:
    """Where images are cached (beside the vLLM venvs)."""
    return Path(os.environ.get("SPARK_LAUNCH_CACHE", Path.home() / ".cache/spark-launch")) / "images"


def ensure_archive(venv: Path) -> tuple[Archive, float]:
    """The test image for `venv`, built now if no cached one matches; and the seconds spent."""
    venv = venv.resolve()
    prefix = base_prefix(venv)
    suite = _os_release("VERSION_CODENAME")
    parts = interpreter_parts(venv, prefix)
    inputs = {
        "recipe": RECIPE,
        "suite": suite,
        "packages": PACKAGES,
        "excludes": PREFIX_EXCLUDES,
        "venv": str(venv),
        "venv_built": (venv / ".complete").stat().st_mtime if (venv / ".complete").exists() else None,
        "prefix": str(prefix),
        "tag": TAG,
    }
    if parts != [prefix]:
        inputs["interpreter"] = [str(p) for p in parts]
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]
    target = cache_dir() / f"vllm-cpu-{VLLM_VERSION}-{key}"
    began = time.monotonic()
    with _cache_lock():
        if not (target / ".complete").exists():
            root = _debian_root(suite)
            _build(target, root, venv, prefix, parts)
    return _read(target), time.monotonic() - began


def base_prefix(venv: Path) -> Path:
    """The installation prefix of the interpreter a venv points at (pyvenv.cfg `home`)."""
    for line in (venv / "pyvenv.cfg").read_text().splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "home":
            return Path(value.strip()).parent
    raise TestbedError(f"{venv}/pyvenv.cfg names no `home`", "is it a virtual environment?")


def interpreter_parts(venv: Path, prefix: Path) -> list[Path]:
    """What of the interpreter's prefix goes into the image: all of it for a Python of its own
    (pyenv, /opt, /usr/local), only its own files for the distribution's (/usr holds the whole
    system, which the Debian root already has)."""
    if prefix != Path("/usr"):
        return [prefix]
    version = next(p.name for p in (venv / "lib").glob("python3*"))
    candidates = (prefix / "bin" / version, prefix / "lib" / version, prefix / "include" / version)
    return [p for p in candidates if p.exists()]


def _read(target: Path) -> Archive:
    manifest = json.loads((target / "manifest.json").read_text())[0]
    image_id = "sha256:" + manifest["Config"].removesuffix(".json")
    return Archive(target, manifest["RepoTags"][0], image_id, manifest["Layers"][0])


def _debian_root(suite: str) -> Path:
    """A minimal Debian root with PACKAGES, made by debootstrap and cached by its inputs."""
    key = hashlib.sha256(json.dumps([suite, PACKAGES]).encode()).hexdigest()[:12]
    root = cache_dir() / f"debian-{suite}-{key}"
    if (root / ".complete").exists():
        return root / "rootfs"
    if shutil.which("debootstrap") is None:
        raise TestbedError("`debootstrap` not found", "apt-get install -y debootstrap")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    _say(f"building a Debian {suite} root with debootstrap (about a minute)")
    command = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        suite,
        str(root / "rootfs"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TestbedError(
            f"debootstrap failed ({done.returncode}): {done.stdout[-1500:]}{done.stderr[-500:]}"
        )
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for path in (root / "rootfs" / leftover).glob("*"):
            if path.is_file():
                path.unlink()
    (root / ".complete").touch()
    return root / "rootfs"


def _build(target: Path, root: Path, venv: Path, prefix: Path, parts: list[Path]) -> None:
    """Write the docker-archive directory: one layer (root + interpreter + venv), config, manifest."""
    shutil.rmtree(target, ignore_errors=True)
    (target / "layer").mkdir(parents=True)
    for inside in (*(p.parent for p in parts), venv.parent):  # the parents the copied trees land in
        (root / inside.relative_to("/")).mkdir(parents=True, exist_ok=True)
    _say(f"writing the image layer: Debian root + {' '.join(map(str, parts))} + {venv}")
    excludes = [f"--exclude={prefix.relative_to('/')}/{pattern}" for pattern in PREFIX_EXCLUDES]
    excludes.append("--exclude=./dev/*")  # the engine gives every container its own /dev
    copied = [str(p.relative_to("/")) for p in (*parts, venv)]
    tar = [
        "tar", "--create", "--numeric-owner", "--file=-", *excludes,
        "-C", str(root), ".",
        "-C", "/", *copied,
    ]  # fmt: skip
    layer_sha = _write_hashed(tar, target / "layer" / "layer.tar")
    config = _config(venv, layer_sha)
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_sha = hashlib.sha256(config_bytes).hexdigest()
    (target / f"{config_sha}.json").write_bytes(config_bytes)
    manifest = [{"Config": f"{config_sha}.json", "RepoTags": [TAG], "Layers": ["layer/layer.tar"]}]
    (target / "manifest.json").write_text(json.dumps(manifest))
    (target / ".complete").touch()


def _config(venv: Path, layer_sha: str) -> dict[str, object]:
    """The image config: PATH starts at the venv, so `vllm` and `python3` are the venv's."""
    created = "2000-01-01T00:00:00Z"  # fixed: the same inputs give the same image id
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return {
        "architecture": arch,
        "os": "linux",
        "created": created,
        "config": {
            "Env": [
                f"PATH={venv}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                f"VIRTUAL_ENV={venv}",
            ],
            "Cmd": ["vllm", "--version"],
            "WorkingDir": "/",
            "Labels": {"org.opencontainers.image.title": "spark-launch test bed: vLLM CPU build"},
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_sha}"]},
        "history": [{"created": created, "created_by": "python -m testbed (debootstrap + the vLLM venv)"}],
    }


def _write_hashed(command: list[str], out: Path) -> str:
    """Run `command`, writing its stdout to `out`; the sha256 of what it wrote."""
    digest = hashlib.sha256()
    with (
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc,
        out.open("wb") as f,
    ):
        stdout, stderr = proc.stdout, proc.stderr
        assert stdout is not None and stderr is not None
        for block in iter(lambda: stdout.read(1 << 20), b""):
            digest.update(block)
            f.write(block)
        error = stderr.read().decode(errors="replace")
    if proc.returncode != 0:
        raise TestbedError(f"writing the image layer failed ({proc.returncode}): {error[-800:]}")
    return digest.hexdigest()


def _os_release(field: str) -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        name, _, value = line.partition("=")
        if name == field:
            return value.strip('"')
    raise TestbedError(f"/etc/os-release has no {field}", "the test image is built on Debian")


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    """One build at a time on this machine (other worktrees share the cache)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with (cache_dir() / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _say(text: str) -> None:
    print(f"testbed: {text}", file=sys.stderr, flush=True)
