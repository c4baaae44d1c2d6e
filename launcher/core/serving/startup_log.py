"""Reading vLLM's start-up from its logs: which stage a node is at, and why it failed. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Stages in order; a node is at the last one whose pattern its log has shown. The lines are
# vLLM's own (V1 engine; compilation and CUDA graphs only show without --enforce-eager).
STAGES: tuple[tuple[str, re.Pattern[str] | None], ...] = (
    ("started", None),
    ("configuring", re.compile(r"non-default args|Resolved architecture|Initializing a V1 LLM engine")),
    ("rendezvous", re.compile(r"distributed_init_method=|DP group leader|world_size=\d+ rank=")),
    ("loading weights", re.compile(r"Starting to load model|Loading weights|Loading safetensors")),
    ("compiling", re.compile(r"Dynamo bytecode transform|Compiling a graph|torch\.compile takes")),
    (
        "KV cache",
        re.compile(
            r"KV cache size|Setting attention block size|for KV cache|Available KV cache memory|"
            r"Memory profiling takes"
        ),
    ),
    ("CUDA graphs", re.compile(r"Capturing CUDA graphs?|Graph capturing finished")),
    ("API up", re.compile(r"Starting vLLM (API )?server on|Application startup complete")),
)
STAGE_NAMES = tuple(name for name, _ in STAGES)

# tqdm bars vLLM prints while loading shards and capturing graphs: "40% Completed | 2/5 [00:01<00:02"
_BAR = r"(\d+)%[^|]*\|[^|]*?\|? ?(\d+)/(\d+) \[([0-9:]+)<([0-9:?]+)"
PROGRESS: dict[str, tuple[re.Pattern[str], str]] = {
    "loading weights": (re.compile(r"Loading safetensors checkpoint shards:\s*" + _BAR), "shards"),
    "CUDA graphs": (re.compile(r"Capturing CUDA graphs?[^:]*:\s*" + _BAR), "graphs"),
}
DONE: dict[str, re.Pattern[str]] = {
    "loading weights": re.compile(r"Loading weights took ([\d.]+) ?s"),
    "compiling": re.compile(r"torch\.compile takes ([\d.]+) ?s"),
}


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A known failure: what happened, and what to do about it."""

    title: str
    hint: str
    evidence: str


@dataclass(frozen=True, slots=True)
class Known:
    """A known failure's signature in a log."""

    pattern: re.Pattern[str]
    title: str
    hint: str


KNOWN_FAILURES: tuple[Known, ...] = (
    Known(
        re.compile(r"KV cache specs for the same layer are different across workers"),
        "the nodes derived different KV cache specs (the field failure: e.g. mamba_cache_mode "
        "'align' on one rank, 'none' on the other)",
        "spark-launch started identical commands, so the nodes' other inputs differ: compare the vLLM "
        "version and build, every VLLM_* variable and the model's config.json on each node",
    ),
    Known(
        re.compile(
            r"Gloo connectFullMesh failed|[Gg]loo.*(Connection refused|Connection reset|[Tt]imed out)"
        ),
        "Gloo could not connect the nodes",
        "check each node's `address` and `interface` in the spec (VLLM_HOST_IP, GLOO_SOCKET_IFNAME) and "
        "that master_port is reachable between the nodes",
    ),
    Known(
        re.compile(
            r"NCCL error|ncclSystemError|ncclInternalError|ncclRemoteError|NCCL WARN .*(connect|socket)", re.I
        ),
        "NCCL could not connect the nodes",
        "check `interface` (NCCL_SOCKET_IFNAME) and `hca` (NCCL_IB_HCA) of each node, and the RoCE link",
    ),
    Known(
        re.compile(
            r"bin/vllm: No such file or directory|vllm: command not found|exec: \"?vllm\"?: executable"
        ),
        "vLLM is not installed where the spec says",
        "vllm.venv (or the image) must hold vLLM on every node; `spark-launch check` shows each install",
    ),
    Known(
        re.compile(r"Cannot assign requested address"),
        "a node does not hold the address the spec gives it",
        "each node's `address` must be an IP on its `interface` (it becomes VLLM_HOST_IP)",
    ),
    Known(
        re.compile(r"[Aa]ddress already in use|Errno 98|port \d+ is (already )?in use"),
        "a port is already in use on the node",
        "stop what holds it (ss -ltnp), or change serve.port / serve.master_port",
    ),
    Known(
        re.compile(
            r"(No such file or directory|does not exist|is not a local folder|Repo id must be|"
            r"Invalid repository ID|Can't load the configuration).{0,200}",
            re.I,
        ),
        "the model was not found on the node",
        "the model must exist at model.path on every node (same path, same files)",
    ),
    Known(
        re.compile(r"less than desired (GPU|CPU) memory utilization|less than requested memory for kv"),
        "the node had less free memory at start than the plan claims",
        "on unified memory (DGX Spark) the page cache left by the last load is not free to the GPU: "
        "`spark-launch up --drop-caches`; else lower serve.gpu_memory_utilization (`spark-launch check` "
        "shows the numbers) or stop what else uses memory there",
    ),
    Known(
        re.compile(
            r"out of memory|OutOfMemoryError|Cannot allocate memory|MemoryError|Insufficient memory", re.I
        ),
        "the node ran out of memory",
        "lower serve.gpu_memory_utilization, max_model_len or max_num_seqs; check nothing else uses the GPU",
    ),
)


def stage_of(log: str, current: int = 0) -> int:
    """The index of the furthest stage the log shows (never below `current`)."""
    best = current
    for index in range(len(STAGES) - 1, current, -1):
        pattern = STAGES[index][1]
        if pattern is not None and pattern.search(log):
            best = index
            break
    return best


def progress_of(log: str, stage: str) -> str | None:
    """How far the current stage is, from vLLM's own progress lines ("3/5 shards, 60%, 0:02 left")."""
    recent = log[-8192:]
    done = DONE.get(stage)
    finished = done.findall(recent) if done else []
    bar, unit = PROGRESS.get(stage, (None, ""))
    bars = bar.findall(recent) if bar else []
    if bars:
        percent, count, total, _, left = bars[-1]
        if count != total or not finished:
            when = "" if "?" in left else f", {left} left"
            return f"{count}/{total} {unit}, {percent}%{when}"
    if finished:
        return f"took {finished[-1]} s"
    return None


def diagnose(log: str, exit_code: int | None = None) -> Diagnosis | None:
    """The first known failure the log shows, or an out-of-memory kill by its exit status."""
    for known in KNOWN_FAILURES:
        match = known.pattern.search(log)
        if match:
            return Diagnosis(known.title, known.hint, _line_around(log, match.start(), match.end())[:300])
    if exit_code in (137, -9):
        oom = KNOWN_FAILURES[-1]
        return Diagnosis(oom.title + " (killed, status 137)", oom.hint, f"exit status {exit_code}")
    return None


def _line_around(text: str, start: int, end: int) -> str:
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    return text[lo : hi if hi != -1 else len(text)].strip()


@dataclass
class NodeWatch:
    """What the launcher has seen of one node while waiting: log offset, tail, stage."""

    name: str
    rank: int
    offset: int = 0
    stage: int = 0
    tail: list[str] = field(default_factory=list)
    text: str = ""  # the whole log seen so far, for diagnosis (vLLM start-up logs are small)
    progress: str | None = None

    def feed(self, chunk: str, new_offset: int) -> bool:
        """Take new log text; True when the stage or its progress changed."""
        self.offset = new_offset
        if not chunk:
            return False
        self.text = (self.text + chunk)[-2_000_000:]
        self.tail = (self.tail + [line for line in chunk.splitlines() if line.strip()])[-40:]
        before = (self.stage, self.progress)
        self.stage = stage_of(self.text, self.stage)
        self.progress = progress_of(self.text, self.stage_name)
        return (self.stage, self.progress) != before

    @property
    def stage_name(self) -> str:
        """The stage as words."""
        return STAGE_NAMES[self.stage]

    @property
    def display(self) -> str:
        """The stage, with its progress when vLLM reports one."""
        return self.stage_name + (f" ({self.progress})" if self.progress else "")
