"""`spark-launch facts` as text: each node's interfaces, GPUs, memory, vLLM and model. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.core.init.interconnect import speed_text


def facts_text(nodes: Mapping[str, Mapping[str, Any]]) -> str:
    """One block per node, as `discover` reported it (`--json` has everything)."""
    blocks = [_node(name, f) for name, f in nodes.items()]
    return "\n\n".join(blocks)


def _node(name: str, f: Mapping[str, Any]) -> str:
    if "error" in f:
        return f"== {name} (ssh {f.get('ssh')})\n  UNREACHABLE (see below)"
    lines = [f"== {name} (ssh {f.get('ssh')}): host {f.get('hostname')}, python {f.get('python')}"]
    lines.append("  interfaces:")
    for iface in f.get("interfaces", []):
        if iface.get("loopback"):
            continue
        addrs = " ".join(f"{a['address']}/{a['prefix']}" for a in iface.get("addresses", [])) or "-"
        rdma = ", ".join(
            f"{r['device']} ({r['via']}, {r.get('state') or '?'})" for r in iface.get("rdma", [])
        )
        ssh = "  <- SSH arrives here" if f.get("ssh_address") in addrs.replace("/", " ").split() else ""
        lines.append(
            f"    {iface['name']:<16} {iface.get('state') or '?':<8} {speed_text(iface.get('speed')):<14} "
            f"{addrs}{'  RDMA ' + rdma if rdma else ''}{ssh}"
        )
    host = f.get("host", {})
    gpus = host.get("gpus") or []
    lines.append(f"  gpus: {'; '.join(gpus) if gpus else 'none (nvidia-smi found none)'}")
    free, total = host.get("MemAvailable", 0) / 2**30, host.get("MemTotal", 0) / 2**30
    lines.append(f"  memory: {free:.1f} GiB available of {total:.1f} GiB (boot id {f.get('boot_id')})")
    lines += _vllm(f)
    lines += _model(f)
    return "\n".join(lines)


def _vllm(f: Mapping[str, Any]) -> list[str]:
    v = f.get("vllm")
    if v is not None:
        where = v.get("venv") or v.get("image")
        found = v.get("vllm_version") or "NOT FOUND"
        return [f"  vllm: {where}: {found}" + (f", build {v['vllm_build']}" if v.get("vllm_build") else "")]
    venvs = f.get("venvs_found", [])
    if not venvs:
        return ["  vllm: no venv found in the usual places"]
    return [f"  vllm found: {x['venv']}: {x.get('vllm_version')}, build {x.get('vllm_build')}" for x in venvs]


def _model(f: Mapping[str, Any]) -> list[str]:
    m = f.get("model")
    if m is not None:
        if not m.get("exists"):
            return [f"  model: {m.get('path')}: NOT FOUND"]
        missing = m.get("missing_shards") or []
        state = f"{len(missing)} shard(s) MISSING" if missing else f"{m.get('weights')} weight file(s)"
        return [f"  model: {m.get('path')}: {state}, config.json {'ok' if m.get('config') else 'MISSING'}"]
    found = f.get("models_found", [])
    if not found:
        return ["  models found: none (Hugging Face cache, /models, ~/models)"]
    return ["  models found:", *(f"    {x['path']} ({x.get('weights')} weight file(s))" for x in found)]
