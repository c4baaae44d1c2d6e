"""Comparing what the nodes report, for `check`: one row per thing that must agree. Pure.

Each row holds every node's value; a row fails when the values differ where they must
not (or differ from the spec), and says how to fix it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from launcher.core.catalog import Catalog, parse_version
from launcher.core.plan import Plan
from launcher.core.spec import PER_NODE_ENV, Spec
from launcher.errors import ExitStatus

# Settings the probe brings back that must agree on every node, and the flag pinning each.
AGREE = {
    "enable_prefix_caching": "--enable-prefix-caching",
    "mamba_cache_mode": "--mamba-cache-mode",
    "mamba_block_size": "--mamba-block-size",
    "block_size": "--block-size",
    "cache_dtype": "--kv-cache-dtype",
    "mamba_cache_dtype": "--mamba-cache-dtype",
    "mamba_ssm_cache_dtype": "--mamba-ssm-cache-dtype",
    "enable_chunked_prefill": "--enable-chunked-prefill",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "async_scheduling": "--async-scheduling",
    "num_speculative_tokens": "--speculative-config",
    "dtype": "--dtype",
    "max_model_len": "--max-model-len",
    "enforce_eager": "--enforce-eager",
    "compilation_mode": "--compilation-config",
    "cudagraph_mode": "--compilation-config",
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "nnodes": "--nnodes",
    "master_addr": "--master-addr",
    "master_port": "--master-port",
    "distributed_executor_backend": "--distributed-executor-backend",
    "is_hybrid": "model.path",
    "is_attention_free": "model.path",
    "use_mla": "model.path",
    "runner_type": "--runner",
}


@dataclass(frozen=True)
class Row:
    """One compared item: every node's value, and whether they pass."""

    area: str
    item: str
    values: dict[str, Any]
    ok: bool
    hint: str | None = None
    level: str = "fail"  # what a failing row means: fail, or warn (reported, not blocking)

    @property
    def failed(self) -> bool:
        """True when this row blocks a start."""
        return not self.ok and self.level == "fail"


@dataclass(frozen=True)
class Report:
    """Every row of a check, in order."""

    nodes: tuple[str, ...]
    rows: tuple[Row, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True when nothing blocks a start."""
        return not any(r.failed for r in self.rows)

    @property
    def unreachable(self) -> bool:
        """True when a node could not be asked at all."""
        return any(r.failed and r.area == "ssh" for r in self.rows)

    @property
    def exit_status(self) -> ExitStatus:
        """OK when alike, UNREACHABLE when a node could not be asked, else NODES_DISAGREE."""
        if self.ok:
            return ExitStatus.OK
        return ExitStatus.UNREACHABLE if self.unreachable else ExitStatus.NODES_DISAGREE


def same(
    area: str, item: str, values: Mapping[str, Any], hint: str, expected: Any = None, level: str = "fail"
) -> Row:
    """A row that passes when every node has the same value (and it equals `expected` if given)."""
    distinct = {json.dumps(v, sort_keys=True, default=str) for v in values.values()}
    ok = len(distinct) == 1 and (expected is None or next(iter(values.values())) == expected)
    return Row(area, item, dict(values), ok, None if ok else hint, level)


def each(area: str, item: str, values: Mapping[str, Any], hint: str, level: str = "fail") -> Row:
    """A row that passes when every node's value is true."""
    ok = all(bool(v) for v in values.values())
    return Row(area, item, dict(values), ok, None if ok else hint, level)


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


def model_rows(spec: Spec, facts: Mapping[str, dict[str, Any]]) -> list[Row]:
    """The model: present everywhere, config and tokenizer identical, weights the same files."""
    m = {n: f.get("model", {}) for n, f in facts.items()}
    path = spec.model.path
    rows = [
        each(
            "model",
            f"{path} exists",
            {n: x.get("exists", False) for n, x in m.items()},
            f"copy the model to {path} on every node (e.g. rsync -a)",
        )
    ]
    if not all(x.get("exists") for x in m.values()):
        return rows
    names = sorted({name for x in m.values() for name in x["hashed"]})
    for name in names:
        rows.append(
            same(
                "model",
                name,
                {n: _short(x["hashed"].get(name)) for n, x in m.items()},
                f"{name} differs between nodes: copy one node's model directory to the others",
            )
        )
    weights = {n: x["weights"] for n, x in m.items()}
    files = sorted({w for ws in weights.values() for w in ws})
    hashed = sum(1 for w in files if all(ws.get(w, {}).get("sha256") for ws in weights.values()))
    rows.append(
        same(
            "model",
            f"weights ({len(files)} files: {hashed} hashed, {len(files) - hashed} by size)",
            {n: _short(json.dumps(ws, sort_keys=True)) for n, ws in weights.items()},
            "the weight files differ (names, sizes or hashes): copy them again",
        )
    )
    return rows


def env_rows(plan: Plan, facts: Mapping[str, dict[str, Any]]) -> list[Row]:
    """The environment vLLM will see: identical except the per-node network variables."""
    effective = {}
    for node in plan.nodes:
        env = {**facts[node.name].get("env", {}), **node.env}
        effective[node.name] = {k: v for k, v in env.items() if k not in PER_NODE_ENV}
    keys = sorted({k for env in effective.values() for k in env})
    rows = [
        same(
            "env",
            k,
            {n: env.get(k, "(unset)") for n, env in effective.items()},
            f"{k} differs between the nodes' environments (their shell profiles or sshd): set it in the "
            "spec's env to make it identical, or remove it from the node",
        )
        for k in keys
    ]
    bad = [r for r in rows if not r.ok]
    return [*bad, Row("env", f"{len(rows) - len(bad)} engine variable(s) identical", {}, True)]


def network_rows(
    spec: Spec, plan: Plan, facts: Mapping[str, dict[str, Any]], reach: Mapping[str, Any]
) -> list[Row]:
    """Interfaces, addresses, free ports on the head, and head reachable from every worker."""
    net = {n.name: facts[n.name].get("network", {}) for n in plan.nodes}
    rows = [
        each(
            "network",
            "interface exists",
            {n: net[n].get("interface_exists") for n in net},
            "fix the node's `interface` in the spec (ip -br link on the node lists them)",
        ),
        each(
            "network",
            "interface holds address",
            {n: net[n].get("holds_address") for n in net},
            "fix the node's `address` (it must be an IP on its `interface`: ip -br addr)",
        ),
    ]
    head = plan.nodes[0].name
    running = facts[head].get("ours_running", False)
    for port, free in net[head].get("ports_free", {}).items():
        rows.append(
            Row(
                "network",
                f"port {port} free on {head}",
                {head: "in use by this cluster" if running else ("free" if free else "IN USE")},
                bool(free) or running,
                None
                if free or running
                else f"stop what holds port {port} on {head} (ss -ltnp), or "
                "change serve.port / serve.master_port",
            )
        )
    if reach:
        ok = all(v == "yes" for v in reach.values())
        hint = (
            "open the master port between the nodes (firewall), and check the head's `address` is "
            "reachable on the fabric"
        )
        rows.append(
            Row(
                "network",
                f"{head}:{plan.master_port} reachable",
                dict(reach),
                ok,
                None if ok else hint,
            )
        )
    return rows


def host_rows(facts: Mapping[str, dict[str, Any]], nnodes: int) -> list[Row]:
    """GPUs and memory as reported (informational, warns when the model cannot fit)."""
    host = {n: f.get("host", {}) for n, f in facts.items()}
    rows = [
        Row(
            "host",
            "gpus (nvidia-smi)",
            {n: h.get("gpus") or "none reported" for n, h in host.items()},
            True,
            level="warn",
        )
    ]
    need = {n: f.get("model", {}).get("weight_bytes", 0) / max(1, nnodes) for n, f in facts.items()}
    fits = {n: host[n].get("MemAvailable", 0) >= need[n] for n in host}
    rows.append(
        Row(
            "host",
            "memory available vs weights per node",
            {
                n: f"{host[n].get('MemAvailable', 0) / 2**30:.1f} GiB free, weights/node "
                f"{need[n] / 2**30:.1f} GiB"
                for n in host
            },
            all(fits.values()),
            None
            if all(fits.values())
            else "free memory is below the weights' share: the start will likely fail",
            "warn",
        )
    )
    return rows


def probe_rows(plan: Plan, catalog: Catalog, resolved: Mapping[str, dict[str, Any]]) -> list[Row]:
    """What each node's own vLLM derives from its own argv and env: equal, and as planned."""
    rows = []
    planned = {d.setting: d.value for d in plan.derived}
    errors = {n: r["error"] for n, r in resolved.items() if "error" in r}
    if errors:
        return [
            Row(
                "probe",
                "vLLM resolves the command",
                errors,
                False,
                "this node's vLLM rejects the planned command: see the error",
            )
        ]
    for key, flag in AGREE.items():
        values = {n: r.get(key) for n, r in resolved.items()}
        lacking = sorted(n for n, r in resolved.items() if key not in r or _lacks(r, key))
        if lacking:
            hint = (
                f"the probe cannot read {key} from the vLLM on {', '.join(lacking)}: the probe and "
                "that release are out of step, so whether the nodes agree is unknown"
            )
            rows.append(
                Row(
                    "probe",
                    key,
                    {n: "(not reported)" if n in lacking else v for n, v in values.items()},
                    False,
                    hint,
                )
            )
            continue
        pin = flag if flag.startswith("--") else f"the same {flag}"
        if key == "mamba_cache_mode" and not catalog.is_live("mamba_cache_mode"):
            pin = "--enable-prefix-caching (the mode follows it)"
        hint = f"the nodes' vLLM derive different {key} (or not the planned one): pin it with {pin}"
        rows.append(same("probe", key, values, hint, expected=_planned(planned.get(key))))
    return rows


def _lacks(resolved: Mapping[str, Any], key: str) -> bool:
    """True when the probe said this vLLM has no field for `key` (see probe.resolve)."""
    return key in resolved.get("missing", ())


def _release(version: Any) -> tuple[int, ...] | None:
    try:
        return parse_version(str(version))
    except ValueError:
        return None


def _planned(value: Any) -> Any:
    """A planned value the probe can be held to (a conditional one, like 'align if hybrid', cannot)."""
    if isinstance(value, str) and " " in value:
        return None
    return value


def _short(value: Any) -> Any:
    """A hash shortened for the table; other values unchanged."""
    if isinstance(value, str) and len(value) >= 32:
        import hashlib

        return hashlib.sha256(value.encode()).hexdigest()[:12] if not value.isalnum() else value[:12]
    return value
