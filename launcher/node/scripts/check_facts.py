"""Everything `spark-launch check` compares across nodes, gathered on this node."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from launcher.node.scripts.common import (  # inlined when sent
    ahead,
    container_state,
    emit,
    image_info,
    our_processes,
    ran,
    read_json,
    read_text,
    run_directory,
)
from launcher.node.scripts.hostinfo import DOCKER_DRIVER, SMI_QUERY, host_details  # inlined when sent
from launcher.node.scripts.inputs import (  # inlined when sent
    engine_env,
    image_probe_key,
    installed_packages,
    python_identity,
    venv_probe_key,
)
from launcher.node.scripts.installed import dist_version, fingerprint, vllm_distribution  # inlined when sent
from launcher.node.scripts.manifest import manifest_answer  # inlined when sent
from launcher.node.scripts.memory import GPU_QUERY, memory_facts  # inlined when sent
from launcher.node.scripts.net import connector, listener  # inlined when sent
from launcher.node.scripts.stacks import tool_facts  # inlined when sent

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

GPU_NAMES = [
    "nvidia-smi",
    "--query-gpu=name,memory.total,memory.used,driver_version",
    "--format=csv,noheader",
]


def site_packages(venv: str) -> str | None:
    """The site-packages directory of a venv."""
    lib = os.path.join(venv, "lib")
    for name in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        candidate = os.path.join(lib, name, "site-packages")
        if os.path.isdir(candidate):
            return candidate
    return None


def vllm_facts(venv: str) -> dict[str, Any]:
    """vLLM's release, commit and a fingerprint of its installed files, read without importing it."""
    import re

    facts: dict[str, Any] = {"vllm_binary": os.access(os.path.join(venv, "bin", "vllm"), os.X_OK)}
    site = site_packages(venv)
    if site is None or not os.path.isdir(os.path.join(site, "vllm")):
        return {**facts, "vllm_version": None}
    name = vllm_distribution(site) or "vllm"
    facts["vllm_distribution"] = vllm_distribution(site)
    facts["vllm_version"] = dist_version(site, name)
    facts["torch_version"] = dist_version(site, "torch")
    version_py = read_text(os.path.join(site, "vllm", "_version.py")) or ""
    commit = re.search(r"commit_id\s*=\s*['\"]([0-9a-f]+)['\"]", version_py)
    facts["vllm_commit"] = commit.group(1) if commit else None
    files = fingerprint(site, name, "vllm")
    facts["vllm_build"] = files["build"]
    facts["vllm_files"] = {k: files[k] for k in ("files", "hashed", "differ", "unknown", "missing")}
    cfg = read_text(os.path.join(venv, "pyvenv.cfg")) or ""
    found = re.search(r"^version(?:_info)?\s*=\s*(\S+)", cfg, re.M)
    facts["python_version"] = found.group(1) if found else None
    return facts


def image_facts(image: str) -> dict[str, Any]:
    """The docker runtime: whether the image is here, its id and repo digests."""
    return image_info(image)


def env_facts() -> dict[str, str]:
    """The engine-relevant environment a launched process inherits here; secret values as hashes."""
    return engine_env(os.environ)


def network_facts(interface: str, address: str, ports: list[int]) -> dict[str, Any]:
    """Whether `interface` exists and holds `address`, and whether `ports` are free to bind."""
    import socket

    done = subprocess.run(
        ["ip", "-o", "addr", "show", "dev", interface], capture_output=True, text=True, check=False
    )
    addresses = [
        w.split("/")[0]
        for line in done.stdout.splitlines()
        for i, w in enumerate(line.split())
        if i > 0 and line.split()[i - 1] in ("inet", "inet6")
    ]
    free = {}
    for port in ports:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            # As vLLM's own servers do: a port left in TIME_WAIT by a stopped run is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("", port))
                free[str(port)] = True
            except OSError:
                free[str(port)] = False
    return {
        "interface_exists": os.path.isdir(f"/sys/class/net/{interface}") or done.returncode == 0,
        "addresses": addresses,
        "holds_address": address in addresses,
        "ports_free": free,
    }


def os_name() -> str | None:
    """The OS as /etc/os-release names it (PRETTY_NAME)."""
    for line in (read_text("/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def host_facts() -> dict[str, Any]:
    """Kernel, OS, GPU (nvidia-smi when present) and memory, as reported here."""
    # platform.release() is this, and importing platform costs more than the call
    facts: dict[str, Any] = {"gpus": None, "kernel": os.uname().release, "os": os_name()}
    meminfo = read_text("/proc/meminfo") or ""
    for line in meminfo.splitlines():
        if line.startswith(("MemTotal:", "MemAvailable:")):
            facts[line.split(":")[0]] = int(line.split()[1]) * 1024
    try:
        done = ran(GPU_NAMES, 20)
        if done.returncode == 0:
            facts["gpus"] = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return facts


PROBE_CACHE = os.path.expanduser("~/.spark-launch/cache/probe")  # core.remote.PROBE_CACHE


def probe_lookup(ask: dict[str, Any], vllm: dict[str, Any]) -> dict[str, Any]:
    """The key the probe's answer for this node is cached under, and that answer if it is there,
    computed as the probe computes it (`inputs.*_probe_key`): an unchanged node's probe is
    answered here, with no vLLM (or container) started. No key when the key's inputs are missing
    (no vLLM, no image): the probe, run anyway, says why."""
    probe = ask["probe"]
    try:
        if ask.get("venv"):
            if not vllm.get("vllm_build"):
                return {"key": None, "cached": None}
            python = python_identity(os.path.join(ask["venv"], "bin", "python"))
            packages = installed_packages(site_packages(ask["venv"]) or ask["venv"])
            env = {**os.environ, **probe["env"]}
            key = venv_probe_key(probe["tag"], python, vllm["vllm_build"], packages, probe["argv"], env)
        else:
            if not vllm.get("image_id"):
                return {"key": None, "cached": None}
            key = image_probe_key(
                probe["tag"], vllm["image_id"], probe["command"], probe["env"], probe.get("model")
            )
    except OSError:
        return {"key": None, "cached": None}
    cached = read_json(os.path.join(PROBE_CACHE, key + ".json"))
    return {"key": key, "cached": cached if isinstance(cached, dict) else None}


def facts(directory: str, request: str) -> None:
    """Everything `check` compares across nodes, gathered on this node: one call answers it all.

    With "models": [paths], each model directory's manifest too. With "probe", the probe's
    answer if this node's cache holds it for exactly what the probe would now be asked
    (`probe_lookup`). With "listen" (the head: {"port", "expect", "seconds"}), once its ports
    are known free it listens on the master port and says so at once ({"listening": ...});
    it stays until the workers came (or the deadline). Not while this cluster runs here: its
    own vLLM holds that port. With "connect" (each worker: {"address", "port", "seconds"}),
    it connects to the head's master port meanwhile, trying again while the head is not
    listening yet, and says how that went ("connected").
    """
    ask = json.loads(request)
    # The slow tools, side by side from the start (each nvidia-smi initializes the driver).
    ahead([GPU_NAMES, GPU_QUERY, *([SMI_QUERY] if ask.get("smi", True) else [])], 20)
    if ask.get("docker"):
        ahead([DOCKER_DRIVER], 60)
    reaching = None
    if ask.get("connect"):
        to = ask["connect"]
        reaching = connector(str(to["address"]), int(to["port"]), float(to["seconds"]))
    running = bool(our_processes(directory)) or bool(
        ask.get("container") and container_state(ask["container"])["running"]
    )
    network = network_facts(ask["interface"], ask["address"], ask.get("ports", []))  # before we listen
    said, waiting = None, None
    if ask.get("listen") and not running:
        port, expect, seconds = (ask["listen"][k] for k in ("port", "expect", "seconds"))
        said, waiting = listener(ask["address"], int(port), int(expect), float(seconds))
        emit(event="listening", listening=said["listening"], port=said.get("port"), error=said.get("error"))
    vllm = vllm_facts(ask["venv"]) if ask.get("venv") else image_facts(ask["image"])
    emit(
        ok=True,
        ours_running=running,
        vllm=vllm,
        probe=probe_lookup(ask, vllm) if ask.get("probe") else None,
        env=env_facts(),
        network=network,
        host=host_facts(),
        host_details=host_details(ask, site_packages(ask["venv"]) if ask.get("venv") else None),
        tools=tool_facts(ask.get("venv")),
        memory=memory_facts(ask.get("model")),
        models={path: manifest_answer(path) for path in ask.get("models", [])},
        connected=reaching() if reaching is not None else None,
    )
    if waiting is not None:
        waiting.join()  # the workers are connecting: a process that ended would refuse them


def main(argv: list[str]) -> None:
    """facts DIR REQUEST_JSON"""
    facts(run_directory(argv), argv[1])


if __name__ == "__main__":  # python3 - NAME DIR ARGS...
    main(sys.argv[2:])
