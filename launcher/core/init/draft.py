"""What `init` decides from every node's facts, besides the fabric: the vLLM install, the
model, the GPUs and memory. Pure: each decision is a value with its reason, or a choice
left to the user with what to choose from (never a silent guess)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launcher.core.spec.versions import is_version
from launcher.core.vllm.catalog import Catalog
from launcher.core.vllm.models import facts_from_config, real_kind

# Where vLLM venvs and models usually live on a node (the Hugging Face cache is added there).
VENV_PLACES = ("/opt/vllm", "/opt/venv", "~/vllm", "~/.venv", "~/venv", "~/vllm-venv")
MODEL_FOLDERS = ("/models", "~/models")
GB10_MEMORY = 0.85
GB10_WHY = (
    "GB10: 128 GB of unified memory shared by the CPU and the GPU; vLLM's default 0.9 leaves too "
    "little for the OS, the page cache (the weights are read through it) and the engine's own "
    "processes. 0.85 is what vLLM's DGX Spark guide runs with; lower it if the node runs more."
)
Facts = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class InitRequest:
    """What the user gave `init`: the hosts, and optionally the model and the vLLM install."""

    hosts: tuple[str, ...]
    name: str
    model: str | None = None
    venv: str | None = None
    image: str | None = None
    ssh_config: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The node names, one per host."""
        return node_names(self.hosts)


@dataclass(frozen=True, slots=True)
class Decided:
    """A value init decided (with why), or left open (choose says what to pick from)."""

    value: Any
    notes: tuple[str, ...] = ()
    choose: str | None = None


def node_names(hosts: tuple[str, ...]) -> tuple[str, ...]:
    """A usable node name per host: the alias or host name, lower-case, numbered if repeated."""
    names: list[str] = []
    for host in hosts:
        bare = host.rpartition("@")[2].split(":")[0].lower()
        name = re.sub(r"[^a-z0-9._-]", "-", bare).strip("-._") or "node"
        names.append(name if name not in names else f"{name}-{len(names) + 1}")
    return tuple(names)


def discover_request(request: InitRequest) -> dict[str, Any]:
    """What the discover script is asked on every node."""
    ask: dict[str, Any] = {"venv": request.venv, "image": request.image, "model": request.model}
    if not request.venv and not request.image:
        ask["venv_places"] = list(VENV_PLACES)
    if not request.model:
        ask["model_folders"] = list(MODEL_FOLDERS)
    return ask


def release(version: Any) -> str | None:
    """The version as the node reports it (0.32.0+cpu, 0.33.1.dev45+g7ee8a6dd0): vllm.version
    is written so; None when it is no PEP 440 version."""
    text = str(version or "")
    return text if is_version(text) else None


def install(request: InitRequest, facts: Facts) -> tuple[Decided, Decided]:
    """(vllm.version, vllm.venv or vllm.image) from what each node holds."""
    if request.image:
        return _image(request.image, facts)
    if request.venv:
        return _venv(request.venv, {n: f.get("vllm", {}) for n, f in facts.items()}, "")
    found: dict[str, dict[str, Any]] = {}
    for node, f in facts.items():
        for venv in f.get("venvs_found", []):
            found.setdefault(venv["venv"], {})[node] = venv
    everywhere = [v for v, nodes in found.items() if len(nodes) == len(facts)]
    lines = [f"  {v}: " + _installs(nodes) for v, nodes in sorted(found.items())]
    if len(everywhere) == 1 and len(found) == 1:
        venv = everywhere[0]
        return _venv(venv, found[venv], " (found there on every node; no --venv given)")
    why = (
        "no vLLM venv found in the usual places (" + ", ".join(VENV_PLACES) + ", or on PATH)"
        if not found
        else "several vLLM installs, or one not on every node: pick the one to run"
    )
    hint = "give --venv PATH (or --image IMAGE) to init"
    return (
        Decided(None, choose=f"{why}; {hint}"),
        Decided(None, ("vLLM installs found:", *lines) if lines else (), choose=f"{why}; {hint}"),
    )


def _installs(nodes: Mapping[str, Mapping[str, Any]]) -> str:
    """`vLLM 0.32.0+cpu (build 1a2b) on node1, node2`, grouped by build."""
    groups: dict[str, list[str]] = {}
    for node, v in nodes.items():
        key = f"vLLM {v.get('vllm_version') or '?'} (build {v.get('vllm_build') or '?'})"
        groups.setdefault(key, []).append(node)
    return "; ".join(f"{key} on {', '.join(names)}" for key, names in groups.items())


def _venv(venv: str, per_node: Mapping[str, Mapping[str, Any]], how: str) -> tuple[Decided, Decided]:
    missing = [n for n, v in per_node.items() if not v.get("vllm_version") or not v.get("vllm_binary")]
    if missing:
        why = f"no vLLM at {venv} on {', '.join(missing)} (no {venv}/bin/vllm, or no vllm package there)"
        fix = "install the same vLLM build there at the same path (copy the venv), then run init again"
        return Decided(None, choose=f"{why}; {fix}"), Decided(None, (_installs(per_node),), f"{why}; {fix}")
    releases = {release(v.get("vllm_version")) for v in per_node.values()}
    builds = {v.get("vllm_build") for v in per_node.values()}
    if len(releases) > 1 or len(builds) > 1:
        why = f"the nodes hold different vLLM installs at {venv}: {_installs(per_node)}"
        fix = "install one build everywhere (copy one node's venv to the others), then run init again"
        return Decided(None, choose=f"{why}; {fix}"), Decided(None, choose=f"{why}; {fix}")
    first = next(iter(per_node.values()))
    kind = str(first.get("vllm_distribution") or "vllm")
    note = f"{kind} {first.get('vllm_version')}, build {first.get('vllm_build')}, on every node{how}"
    return Decided(release(first.get("vllm_version")), (note,)), Decided(venv)


def _image(image: str, facts: Facts) -> tuple[Decided, Decided]:
    per_node = {n: f.get("vllm", {}) for n, f in facts.items()}
    missing = [n for n, v in per_node.items() if not v.get("image_id")]
    if missing:
        no_docker = [n for n in missing if per_node[n].get("docker") is False]
        why = f"image {image} not on {', '.join(missing)} (docker image inspect found none)"
        if no_docker:
            why = f"no docker command on {', '.join(no_docker)}, so image {image} is missing there"
        return Decided(None, choose=why), Decided(None, choose=f"{why}; load the same image on every node")
    ids = {v["image_id"] for v in per_node.values()}
    digests = {tuple(sorted(v.get("repo_digests") or [])) for v in per_node.values()}
    if len(ids) > 1 and (len(digests) > 1 or digests == {()}):
        why = "the nodes hold different images under that name: " + "; ".join(
            f"{n}: {str(v['image_id'])[:19]}" for n, v in per_node.items()
        )
        return Decided(None, choose=why), Decided(None, choose=f"{why}; load one image everywhere")
    versions = {release(v.get("vllm_version")) for v in per_node.values()}
    same = "same image id" if len(ids) == 1 else "same repo digest"
    note = f"{image}: {same} on every node ({str(next(iter(ids)))[:19]})"
    if None in versions or len(versions) > 1:
        why = "the image does not say its vLLM release (no label; its python3 could not be asked)"
        return Decided(None, choose=f"{why}; write the release vLLM reports in it"), Decided(image, (note,))
    return Decided(versions.pop(), ("read from the image on every node",)), Decided(image, (note,))


def model(request: InitRequest, facts: Facts, head: str) -> tuple[Decided, Decided, list[str]]:
    """(model.path, model.kind, warnings): the given path checked everywhere, or the choices found."""
    if not request.model:
        return _model_choices(facts)
    path = request.model
    checks = {n: f.get("model", {}) for n, f in facts.items()}
    complete = {n: _incomplete(c) is None for n, c in checks.items()}
    problems = {n: _incomplete(c) for n, c in checks.items() if _incomplete(c)}
    notes = [f"{path}: " + ("complete on every node" if not problems else "complete on " + _nodes(complete))]
    notes += [f"{node}: {why}" for node, why in problems.items()]
    if not any(complete.values()):
        why = f"no complete model at {path} on any node"
        return Decided(None, tuple(notes), f"{why}: fix the path, or copy the model there"), Decided(None), []
    source = head if complete[head] else next(n for n, ok in complete.items() if ok)
    warnings = []
    if problems:
        sync = "spark-launch sync models SPEC" + ("" if source == head else f" --from {source}")
        warnings.append(f"the model is not complete on {', '.join(problems)}: {sync} copies it there")
        notes.append(f"next: {sync}")
    # The model's kind needs the release's registry: model_kind() decides it once that is known.
    return Decided(path, tuple(notes)), Decided(None, (f"config.json on {source}",)), warnings


def lacking_model(request: InitRequest, facts: Facts) -> tuple[str, ...]:
    """The nodes whose copy of the requested model is missing or incomplete (`sync models` fixes it)."""
    if not request.model:
        return ()
    return tuple(n for n, f in facts.items() if _incomplete(f.get("model", {})))


def model_kind(facts: Facts, source: str, catalog: Catalog | None) -> Decided:
    """model.kind as vLLM's registry (of the release found) sees the config.json on `source`."""
    config = facts[source].get("model", {}).get("config")
    where = f"config.json on {source}"
    if not isinstance(config, dict) or catalog is None:
        return Decided(None, (f"{where}: the model's kind is unknown without the release's catalog",))
    known = facts_from_config(config, where, catalog)
    return Decided(real_kind(known), (f"from {where}: {known.text}",))


def _incomplete(check: Mapping[str, Any]) -> str | None:
    """Why a model directory cannot serve as it is; None when it looks complete."""
    if not check.get("exists"):
        return "not there"
    if not check.get("config"):
        return "no readable config.json"
    if not check.get("weights"):
        return "no weight files"
    if check.get("missing_shards"):
        shards = check["missing_shards"]
        return f"{len(shards)} shard(s) named in the index missing ({shards[0]}, ...)"
    if not check.get("tokenizer"):
        return "no tokenizer file (tokenizer.json, tokenizer.model, vocab.json)"
    return None


def _nodes(flags: Mapping[str, bool]) -> str:
    return ", ".join(n for n, ok in flags.items() if ok) or "no node"


def _model_choices(facts: Facts) -> tuple[Decided, Decided, list[str]]:
    where: dict[str, list[str]] = {}
    sizes: dict[str, str] = {}
    for node, f in facts.items():
        for found in f.get("models_found", []):
            where.setdefault(found["path"], []).append(node)
            sizes[found["path"]] = (
                f"{found.get('weights', 0)} weight files, {_gib(found.get('weight_bytes'))}"
            )
    lines = [f"  {path}  ({sizes[path]}; on {', '.join(nodes)})" for path, nodes in sorted(where.items())]
    why = (
        "no --model given: pick one of the models found (then spark-launch sync models copies it "
        "to the nodes that lack it)"
        if where
        else "no --model given and no model found in the Hugging Face cache or /models: write its path"
    )
    kind = Decided(None, ("the model's kind: decoder | hybrid | attention-free | pooling | encoder-decoder",))
    return Decided(None, ("models found:", *lines) if lines else (), why), kind, []


def _gib(size: Any) -> str:
    value = float(size or 0) / 2**30
    return f"{value:.1f} GiB" if value >= 0.1 else f"{float(size or 0) / 2**20:.0f} MiB"


def gpus(facts: Facts) -> tuple[dict[str, Decided], str]:
    """Per node `gpus`, and the kind of the cluster: 'gb10', 'gpu' or 'cpu' (no GPU anywhere)."""
    found = {n: list(f.get("host", {}).get("gpus") or []) for n, f in facts.items()}
    if not any(found.values()):
        note = "no GPU found (nvidia-smi): counted as 1 worker, as vLLM's CPU build runs"
        return {n: Decided(1, (note,)) for n in facts}, "cpu"
    out = {}
    for node, lines in found.items():
        if not lines:
            others = next(n for n, g in found.items() if g)
            why = f"nvidia-smi found no GPU here while {others} has {len(found[others])}: is the driver up?"
            out[node] = Decided(None, choose=why)
        else:
            names = sorted({line.split(",")[0].strip() for line in lines})
            out[node] = Decided(len(lines), (f"{len(lines)} x {', '.join(names)} (nvidia-smi)",))
    models = {line.split(",")[0] for lines in found.values() for line in lines}
    return out, "gb10" if models and all("GB10" in m for m in models) else "gpu"


def cpu_kv_space(facts: Facts) -> Decided:
    """VLLM_CPU_KVCACHE_SPACE (GiB) for the CPU build: a tenth of each node's share of free memory."""
    shares = []
    for f in facts.values():
        boot = f.get("boot_id")
        sharing = sum(1 for g in facts.values() if boot and g.get("boot_id") == boot) or 1
        shares.append(int(f.get("host", {}).get("MemAvailable") or 0) / sharing)
    share = min(shares) / 2**30 if shares else 0
    value = max(1, min(16, int(share / 10)))
    together = len({f.get("boot_id") for f in facts.values()}) < len(facts)
    notes = [
        "vLLM's CPU build: without it each node sizes its KV cache from all of its memory; "
        f"a tenth of each node's share of the available memory ({share:.1f} GiB), at least 1 GiB"
    ]
    if together:
        notes.append("some nodes run on one machine (the same boot id): they share its memory")
    return Decided(str(value), tuple(notes))
