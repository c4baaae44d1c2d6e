"""A run's receipt: every input of one start of the cluster, as a JSON-ready value. Pure.

Each node's inputs are what makes its vLLM start the way it does: its argv, its environment
(names and value hashes; secrets by name only), the vLLM build or the image, the model's
files by sha256, and the host facts that change a start (kernel, OS, driver, GPUs). The
same inputs, read from the nodes now instead of from a run, are a snapshot (`diff now`, the
lock file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from hashlib import sha256
from typing import Any

from launcher.core.checks.check_report import Row
from launcher.core.plan import Plan
from launcher.core.render import NodeCommand
from launcher.core.spec.sections import Spec
from launcher.core.sync.model_manifest import Manifest, model_dirs

FORMAT = 1  # the receipt's layout; a reader skips a receipt of another format
SECRET = "(secret)"
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")  # as the node scripts' engine_env
VENV_KEYS = {
    "release": "vllm_version",
    "commit": "vllm_commit",
    "build": "vllm_build",
    "python": "python_version",
    "torch": "torch_version",
}


def value_hash(value: str) -> str:
    """A short, stable hash of a variable's value: equal values, equal hashes."""
    return "sha256:" + sha256(value.encode()).hexdigest()[:16]


def env_hashes(spec: Spec, node: NodeCommand, inherited: Mapping[str, str]) -> dict[str, str]:
    """The environment the rank runs with, each value hashed; a secret by its name only."""
    env = {**inherited, **node.env}
    out = {}
    for name, value in sorted(env.items()):
        hidden = name in spec.secrets or any(w in name for w in SECRET_WORDS) or value.startswith("sha256:")
        out[name] = SECRET if hidden else value_hash(value)
    out.update(dict.fromkeys(node.secrets, SECRET))
    return dict(sorted(out.items()))


def vllm_inputs(spec: Spec, found: Mapping[str, Any]) -> dict[str, Any]:
    """The vLLM build (release, commit, fingerprint, python, torch), or the image (id, digests)."""
    if spec.vllm.runtime == "docker":
        return {
            "image": spec.vllm.image,
            "image_id": found.get("image_id"),
            "repo_digests": sorted(found.get("repo_digests") or []),
        }
    return {key: found.get(fact) for key, fact in VENV_KEYS.items()}


def model_inputs(spec: Spec, manifests: Mapping[str, Any]) -> dict[str, Any]:
    """Each model directory: its manifest's digest and every file's sha256, by name."""
    out = {}
    for label, path in model_dirs(spec):
        manifest: Manifest | None = manifests.get(path)
        out[label.replace(" ", "_")] = {
            "path": path,
            "digest": manifest.digest[:16] if manifest and manifest.exists else None,
            "files": {rel: f.sha256 for rel, f in sorted(manifest.files.items())} if manifest else {},
        }
    return out


def host_inputs(host: Mapping[str, Any]) -> dict[str, Any]:
    """The host facts a start depends on and that must not move under a run: kernel, OS, GPUs, driver."""
    gpus = [str(line).split(",") for line in host.get("gpus") or []]
    return {
        "kernel": host.get("kernel"),
        "os": host.get("os"),
        "gpus": [f"{g[0].strip()}, {g[1].strip()}" if len(g) > 1 else g[0].strip() for g in gpus],
        "driver": ", ".join(sorted({g[3].strip() for g in gpus if len(g) > 3})) or None,
    }


def node_inputs(spec: Spec, node: NodeCommand, facts: Mapping[str, Any] | None) -> dict[str, Any]:
    """One node's inputs; without facts (the check skipped) only what the plan decides."""
    inputs: dict[str, Any] = {
        "rank": node.rank,
        "argv": list(node.argv),
        "env": env_hashes(spec, node, (facts or {}).get("env", {})),
    }
    if facts is not None:
        inputs["vllm"] = vllm_inputs(spec, facts.get("vllm", {}))
        inputs["models"] = model_inputs(spec, facts.get("models", {}))
        inputs["host"] = host_inputs(facts.get("host", {}))
    return inputs


def snapshot(spec: Spec, plan: Plan, facts: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """Every node's inputs (the plan's, and the nodes' facts where gathered), keyed by node."""
    return {
        "plan": {
            "digest": plan.digest,
            "vllm_version": plan.vllm_version,
            "catalog": plan.catalog_version,
            "runtime": plan.runtime,
        },
        "nodes": {n.name: node_inputs(spec, n, facts.get(n.name) if facts else None) for n in plan.nodes},
    }


def new_receipt(
    spec: Spec,
    plan: Plan,
    run_id: str,
    started: str,
    facts: Mapping[str, Mapping[str, Any]] | None,
    rows: Sequence[Row] | None,
) -> dict[str, Any]:
    """The receipt of a run that is starting (outcome 'starting' until `finished`)."""
    return {
        "format": FORMAT,
        "cluster": spec.name,
        "run_id": run_id,
        "started": started,
        "finished": None,
        "outcome": "starting",
        "detail": "",
        **snapshot(spec, plan, facts),
        "check": [_row(r) for r in rows] if rows is not None else None,
        "evidence": [],
    }


def finished(receipt: Mapping[str, Any], when: str, outcome: str, detail: str) -> dict[str, Any]:
    """The receipt with its outcome: served, started (not waited for), failed or interrupted."""
    return {**receipt, "finished": when, "outcome": outcome, "detail": detail}


def with_evidence(receipt: Mapping[str, Any], evidence: Mapping[str, Any]) -> dict[str, Any]:
    """The receipt with one more piece of evidence (stacks and log tails, captured at a failure)."""
    return {**receipt, "evidence": [*receipt.get("evidence", []), dict(evidence)]}


def summary(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """One line's worth of a receipt, for `runs`."""
    return {
        "run_id": receipt.get("run_id"),
        "started": receipt.get("started"),
        "finished": receipt.get("finished"),
        "outcome": receipt.get("outcome"),
        "plan": receipt.get("plan", {}).get("digest"),
        "vllm": receipt.get("plan", {}).get("vllm_version"),
        "checked": receipt.get("check") is not None,
        "evidence": len(receipt.get("evidence", [])),
        "detail": receipt.get("detail", ""),
    }


def _row(row: Row) -> dict[str, Any]:
    return {
        "area": row.area,
        "item": row.item,
        "ok": row.ok,
        "level": row.level,
        "values": {
            n: v if isinstance(v, (str, int, float, bool)) or v is None else str(v)
            for n, v in row.values.items()
        },
    }
