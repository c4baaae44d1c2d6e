"""The facts `check` compares, and the image a node's engine holds, as the nodes report them. Pure.

The facts tree is typed (TypedDicts: the rows read it as a mapping) and rebuilt from the
answer key by key, each value checked; keys the launcher does not read are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict, cast

from launcher.core.answers import sync_answer
from launcher.core.answers.hosts_answer import HostDetails, host_details
from launcher.core.answers.probe_answer import Listening, Probed
from launcher.core.answers.read import MAX_BYTES, At, BadAnswer, Refused, strings
from launcher.core.answers.run_answer import failed
from launcher.core.sync.model_manifest import Manifest

ENV_NAME_LIMIT = 256
MAX_PORT = 65535


class FileCheck(TypedDict, total=False):
    """An install's files against its RECORD: how many, and the first that differ."""

    files: int
    hashed: int
    differ: list[str]
    unknown: list[str]
    missing: list[str]


class VllmFacts(TypedDict, total=False):
    """The vLLM install (venv runtime) or the image (docker runtime) on a node."""

    venv: str
    vllm_binary: bool
    vllm_version: str | None
    torch_version: str | None
    vllm_commit: str | None
    vllm_build: str | None
    vllm_files: FileCheck
    python_version: str | None
    vllm_distribution: str | None
    image: str
    docker: bool
    image_id: str | None
    repo_digests: list[str]
    size: int | None
    error: str


class NetworkFacts(TypedDict, total=False):
    """The node's interface, its addresses, and which ports are free."""

    interface_exists: bool
    addresses: list[str]
    holds_address: bool
    ports_free: dict[str, bool]


class HostFacts(TypedDict, total=False):
    """Kernel, OS, the GPUs as nvidia-smi lists them, and memory."""

    gpus: list[str] | None
    kernel: str | None
    os: str | None
    MemTotal: int
    MemAvailable: int


class ToolFacts(TypedDict):
    """Where py-spy is (None: missing), and whether it may read our processes."""

    py_spy: str | None
    ptrace: str
    ptrace_ok: bool


class GpuMemory(TypedDict):
    """One GPU's memory (None: the GPU reports none of its own)."""

    name: str
    total: int | None
    free: int | None
    driver: str


class MemoryFacts(TypedDict, total=False):
    """What the memory guard weighs."""

    meminfo: dict[str, int]
    gpus: list[GpuMemory] | None
    model_config: dict[str, Any] | None


class ModelSize(TypedDict):
    """The model's size on the node."""

    weight_bytes: int


class ProbeFound(TypedDict):
    """What the facts call found in the node's probe cache: the key the answer is kept under
    (None: its inputs are missing, no vLLM or no image), and that answer if it is there."""

    key: str | None
    cached: Probed | None


class Facts(TypedDict, total=False):
    """Everything `check` compares on one node, its model manifests and probe cache included."""

    ours_running: bool
    vllm: VllmFacts
    env: dict[str, str]
    network: NetworkFacts
    host: HostFacts
    host_details: HostDetails
    tools: ToolFacts
    memory: MemoryFacts
    models: dict[str, Manifest]
    model: ModelSize
    probe: ProbeFound | None
    connected: str | None  # a worker's connection to the head's master port: "yes", or why not


def facts(raw: object) -> Facts:
    """The facts script's answer."""
    at = At(raw)
    error = failed(at)
    if error is not None:
        raise Refused(error)
    return Facts(
        ours_running=at.field("ours_running").flag(),
        vllm=vllm(at.field("vllm")),
        env={k: v.text() for k, v in at.field("env").entries(_env_name, 10_000).items()},
        network=_network(at.field("network")),
        host=host(at.field("host")),
        host_details=host_details(at.field("host_details")),
        tools=ToolFacts(
            py_spy=at.field("tools").maybe("py_spy", At.absolute),
            ptrace=at.field("tools").field("ptrace").name(),
            ptrace_ok=at.field("tools").field("ptrace_ok").flag(),
        ),
        memory=_memory(at.field("memory")),
        models={path: sync_answer.manifest(m.value, path) for path, m in _models(at).items()},
        probe=at.maybe("probe", _probe_found),
        connected=at.maybe("connected", lambda a: a.text(500)),
    )


def listening_event(raw: object) -> Listening | None:
    """The head's word inside its facts call: listening on the master port, or why not (None:
    the line is another: the facts' answer, or a manifest's hashing progress)."""
    at = At(raw)
    if at.maybe("event", lambda a: a.one_of("listening", "hashing")) != "listening":
        return None
    if at.field("listening").flag():
        return Listening(at.field("port").integer(1, MAX_PORT))
    return Listening(None, at.maybe("error", At.text) or "the head cannot listen")


def _models(at: At) -> dict[str, At]:
    found = at.get("models")
    return found.entries(At.absolute, 1000) if found is not None else {}


def _probe_found(at: At) -> ProbeFound:
    key = at.maybe("key", lambda a: a.name(128))
    cached = at.get("cached")
    if cached is None:
        return ProbeFound(key=key, cached=None)
    found = Probed.parse(cached.value)
    return ProbeFound(
        key=key, cached=None if found.error else Probed(found.resolved, True, found.vllm_version)
    )


def _env_name(at: At) -> str:
    name = at.name(ENV_NAME_LIMIT)
    if not name.replace("_", "a").isalnum() or not name.isascii():
        raise BadAnswer(at.where, f"{name[:80]!r} is not a variable name")
    return name


def _file_check(at: At) -> FileCheck:
    def names(key: str) -> list[str]:
        return list(at.maybe(key, lambda a: strings(a, At.relative, 1000)) or ())

    count = at.field("files").integer(0, 10_000_000)
    hashed = at.field("hashed").integer(0, 10_000_000)
    return FileCheck(
        files=count, hashed=hashed, differ=names("differ"), unknown=names("unknown"), missing=names("missing")
    )


# How each key of the vllm part is read; a key the node leaves out stays out.
VLLM_KEYS: dict[str, Any] = {
    "venv": At.absolute,
    "vllm_binary": At.flag,
    "vllm_version": lambda a: a.name(128),
    "torch_version": lambda a: a.name(128),
    "vllm_commit": lambda a: a.name(128),
    "vllm_build": lambda a: a.name(128),
    "vllm_files": _file_check,
    "python_version": lambda a: a.name(128),
    "vllm_distribution": lambda a: a.name(128),
    "image": At.name,
    "docker": At.flag,
    "image_id": lambda a: a.name(128),
    "repo_digests": lambda a: list(strings(a, limit=1000)),
    "size": At.integer,
    "error": At.text,
}


def vllm(at: At) -> VllmFacts:
    """The vllm part of facts (or of discover): only the keys present, each checked."""
    found = at.fields()
    # Each value read by its key's reader in VLLM_KEYS, so each has that key's declared type.
    return cast("VllmFacts", {k: at.maybe(k, read) for k, read in VLLM_KEYS.items() if k in found})


def _network(at: At) -> NetworkFacts:
    ports = at.field("ports_free").entries(_port, 1000)
    return NetworkFacts(
        interface_exists=at.field("interface_exists").flag(),
        addresses=list(strings(at.field("addresses"), limit=1000)),
        holds_address=at.field("holds_address").flag(),
        ports_free={port: free.flag() for port, free in ports.items()},
    )


def _port(at: At) -> str:
    word = at.name(5)
    if not word.isdigit() or not 0 < int(word) <= MAX_PORT:
        raise BadAnswer(at.where, f"{word!r} is not a port")
    return word


def host(at: At) -> HostFacts:
    """GPUs and memory as the node reports them (facts and discover alike)."""
    out = HostFacts(gpus=at.maybe("gpus", lambda a: list(strings(a, limit=256))))
    for key in ("kernel", "os"):
        if key in at.fields():
            out[key] = at.maybe(key, At.name)
    if at.get("MemTotal") is not None:
        out["MemTotal"] = at.field("MemTotal").integer(0, MAX_BYTES)
    if at.get("MemAvailable") is not None:
        out["MemAvailable"] = at.field("MemAvailable").integer(0, MAX_BYTES)
    return out


def _memory(at: At) -> MemoryFacts:
    meminfo = at.field("meminfo").entries(At.name, 1000)
    return MemoryFacts(
        meminfo={k: v.integer(0, MAX_BYTES) for k, v in meminfo.items()},
        gpus=at.maybe("gpus", lambda a: [_gpu(g) for g in a.items(256)]),
        model_config=at.maybe("model_config", _config),
    )


def _config(at: At) -> dict[str, Any]:
    at.fields()
    config: dict[str, Any] = at.json()
    return config


def _gpu(at: At) -> GpuMemory:
    return GpuMemory(
        name=at.field("name").name(),
        total=at.maybe("total", At.integer),
        free=at.maybe("free", At.integer),
        driver=at.field("driver").name(),
    )


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """The spec's image as a node's engine holds it, and the free space where it keeps images."""

    docker: bool
    image_id: str | None = None
    repo_digests: tuple[str, ...] = ()
    size: int = 0
    error: str | None = None
    root_dir: str | None = None
    free_bytes: int | None = None

    @classmethod
    def parse(cls, raw: object) -> ImageFacts:
        """From the image script's answer."""
        at = At(raw)
        return cls(
            docker=at.field("docker").flag(),
            image_id=at.maybe("image_id", lambda a: a.name(128)),
            repo_digests=at.maybe("repo_digests", lambda a: strings(a, limit=1000)) or (),
            size=at.maybe("size", At.integer) or 0,
            error=at.maybe("error", At.text),
            root_dir=at.maybe("root_dir", At.absolute),
            free_bytes=at.maybe("free_bytes", At.integer),
        )
