"""The docker runtime's container: the spec's section, its checks, the `docker run` options. Pure.

The defaults are what NVIDIA's vLLM container needs on a DGX Spark: the node's IPC
namespace and /dev/shm, every GPU through the NVIDIA runtime hook, unlimited locked
memory for RDMA and the stack limit NVIDIA recommends. A spec changes them only for a
machine that differs (the CPU test bed, say), and the plan says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Literal

from launcher.core.spec.schema import doc
from launcher.errors import Problem

# Patterns of container specs only, compiled when first used (re keeps them): not by every plan.
SIZE = r"(?i)[1-9][0-9]*[bkmg]?\Z"
WHERE = ("vllm", "container")


@dataclass(frozen=True, slots=True)
class ContainerSection:
    """docker runtime: how each node's container runs. The defaults are what a DGX Spark needs."""

    ipc: Literal["host", "private"] = doc(
        "host: the node's IPC namespace and /dev/shm, as NVIDIA's vLLM container expects; "
        "private: the container's own, of shm_size",
        default="host",
    )
    shm_size: str | None = doc(
        "with ipc private: the size of the container's /dev/shm, e.g. 16g", default=None
    )
    gpus: Literal["all", "none"] = doc(
        "all: every GPU of the node (--gpus=all, through the NVIDIA container runtime hook)", default="all"
    )
    memlock: int = doc("locked-memory limit in bytes (RDMA pins memory); -1 is unlimited", default=-1)
    stack: int = doc("stack size limit in bytes, as NVIDIA recommends for its containers", default=67108864)
    compile_cache: str = doc(
        "a Docker volume of the node's that keeps what vLLM and torch compile (torch inductor, "
        "Triton, vLLM's torch.compile cache) from one start of the container to the next, as a "
        'venv\'s home does; "none": every start compiles anew',
        default="spark-launch-compile-cache",
    )


DEFAULTS = ContainerSection()

# Why each option has its default value (for the plan).
WHY_DEFAULT = {
    "ipc": "NVIDIA's vLLM container shares the node's IPC namespace and /dev/shm (NCCL and vLLM's "
    "shared-memory queues between the processes of a node)",
    "gpus": "every GPU of the node, through the NVIDIA container runtime hook",
    "memlock": "RDMA (NCCL over RoCE) pins memory: unlimited, as NVIDIA recommends",
    "stack": "the stack limit NVIDIA recommends for its containers",
    "compile_cache": "a container's own /tmp and home are new at every start: without a volume, "
    "every start compiles its kernels again",
}
CACHE_TARGET = "/spark-launch-cache"  # where the volume appears in the container
# torch keeps its precompiled C++ headers (inductor's CPU kernels include them) in its default
# cache directory, $TMPDIR/torchinductor_$USER, whatever TORCHINDUCTOR_CACHE_DIR says
# (torch/_inductor/codecache.py, _HEADER_DIR): the volume appears there too, for root, the user
# of vLLM's images. Without it each start compiles them again (about 20 s of the bed's start).
HEADERS_TARGET = "/tmp/torchinductor_root"
# Where vLLM, torch inductor and Triton keep their compiled files, pointed into the volume.
CACHE_ENV = {
    "VLLM_CACHE_ROOT": f"{CACHE_TARGET}/vllm",
    "TORCHINDUCTOR_CACHE_DIR": f"{CACHE_TARGET}/torchinductor",
    "TRITON_CACHE_DIR": f"{CACHE_TARGET}/triton",
}
VOLUME = r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z"


def check_container(section: ContainerSection, runtime: str, model_path: str) -> list[Problem]:
    """Problems of the container section (and of the model path as a mount source)."""
    if runtime != "docker":
        if section == DEFAULTS:
            return []
        return [Problem(WHERE, "is only used with runtime docker", "remove it, or set vllm.runtime: docker")]
    problems = []
    shm = (*WHERE, "shm_size")
    if section.ipc == "host" and section.shm_size is not None:
        problems.append(
            Problem(shm, "has no effect with ipc host", "the container uses the node's /dev/shm: remove it")
        )
    if section.ipc == "private" and section.shm_size is None:
        problems.append(
            Problem(
                shm,
                "is required with ipc private",
                "docker's default /dev/shm is 64 MB, too small for vLLM: e.g. shm_size: 16g",
            )
        )
    if section.shm_size is not None and not re.match(SIZE, section.shm_size):
        problems.append(Problem(shm, f"{section.shm_size!r} is not a size", 'write it like "16g" or "512m"'))
    for key in ("memlock", "stack"):
        value = getattr(section, key)
        if value == 0 or value < -1:
            problems.append(
                Problem((*WHERE, key), f"{value} is not a limit", "use -1 (unlimited) or a number of bytes")
            )
    if section.compile_cache != "none" and not re.match(VOLUME, section.compile_cache):
        problems.append(
            Problem(
                (*WHERE, "compile_cache"),
                f"{section.compile_cache!r} is not a Docker volume name",
                'letters, digits, "_", "." and "-" (e.g. spark-launch-compile-cache), or "none"',
            )
        )
    if any(c in model_path for c in ',"\n'):
        problems.append(
            Problem(
                ("model", "path"),
                "cannot be mounted into a container: it holds a comma, a quote or a newline",
                "move the model to a path without them",
            )
        )
    return problems


def container_options(section: ContainerSection, model_path: str) -> tuple[str, ...]:
    """The `docker run` options that `up` and the probe share: what the container sees."""
    options = ["--pull=never", "--network=host", f"--ipc={section.ipc}"]
    if section.shm_size is not None:
        options.append(f"--shm-size={section.shm_size}")
    if section.gpus == "all":
        options.append("--gpus=all")
    options += [f"--ulimit=memlock={section.memlock}", f"--ulimit=stack={section.stack}"]
    # --mount, not --volume: a missing model is an error, not an empty directory made on the node.
    options.append(f"--mount=type=bind,source={model_path},target={model_path},readonly")
    if section.compile_cache != "none":
        options += cache_mounts(section.compile_cache)
        options += [f"--env={k}={v}" for k, v in CACHE_ENV.items()]
    return tuple(options)


def cache_mounts(volume: str) -> tuple[str, str]:
    """The compile cache volume's mounts: where the env points vLLM, inductor and Triton, and
    where torch keeps its precompiled headers."""
    mount = f"--mount=type=volume,source={volume},target="
    return mount + CACHE_TARGET, mount + HEADERS_TARGET


def container_settings(section: ContainerSection) -> list[tuple[str, object, str | None, str, str]]:
    """(setting, value, flag, why, source: spec or launcher) of every container option, for the plan."""
    rows: list[tuple[str, object, str | None, str, str]] = [
        (
            "container image pull",
            "never",
            "--pull=never",
            "a node without the image fails at once instead of fetching whatever the name points "
            "at there (`spark-launch sync images` copies the head's image)",
            "launcher",
        ),
        (
            "container network",
            "host",
            "--network=host",
            "the node's own interfaces and addresses",
            "launcher",
        ),
    ]
    for f in fields(ContainerSection):
        value = getattr(section, f.name)
        if f.name == "shm_size" and value is None:
            continue
        flag = _flag(f.name, value)
        source = "launcher" if value == getattr(DEFAULTS, f.name) else "spec"
        if source == "launcher":
            why = f"the default: {WHY_DEFAULT[f.name]}"
        else:
            why = f"from the spec (vllm.container.{f.name}); a DGX Spark needs " + (
                f"{getattr(DEFAULTS, f.name)}" if f.name != "shm_size" else "ipc host instead"
            )
        rows.append((f"container {f.name}", "unlimited" if value == -1 else value, flag, why, source))
    return rows


def changed_from_defaults(section: ContainerSection) -> list[str]:
    """The options the spec sets to something other than what a DGX Spark needs."""
    return [
        f"{f.name} {getattr(section, f.name)}"
        for f in fields(ContainerSection)
        if f.name != "shm_size" and getattr(section, f.name) != getattr(DEFAULTS, f.name)
    ]


def _flag(name: str, value: object) -> str | None:
    if name == "compile_cache":
        return None if value == "none" else " ".join(cache_mounts(str(value)))
    if name == "gpus":
        return "--gpus=all" if value == "all" else None
    if name in ("memlock", "stack"):
        return f"--ulimit={name}={value}"
    return f"--ipc={value}" if name == "ipc" else f"--shm-size={value}"
