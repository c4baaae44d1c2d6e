"""The lock file (SPEC.lock): per node, what the spec does not say but a start depends on. Pure.

Plain text for review in git: one `[node]` section per node in rank order, then one
`key = value` line per input, keys sorted: the vLLM build (release, commit, fingerprint,
python, torch) or the image (id, repo digests), each model directory's manifest digest and
every file's sha256 (so a change names the file), and the host facts that must not move
(kernel, OS, GPUs, driver). A key or value that would not read back as written is a JSON
string. `up --locked` compares the nodes with it before anything starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launcher.errors import SparkLaunchError

PLAIN = re.compile(r"^[^\s\"\[#=][^=\n]*$")  # safe to write without quotes (no ' = ' inside either)
HEADER = (
    "# spark-launch lock: what each node held when this file was written (`spark-launch lock SPEC`).\n"
    "# `spark-launch up --locked SPEC` refuses to start while a node differs. Review changes like code.\n"
)


class LockError(SparkLaunchError):
    """The lock file cannot be read: it names the file and line."""


@dataclass(frozen=True, slots=True)
class Lock:
    """A lock file as read: where it came from, and each node's entries."""

    source: str
    nodes: dict[str, dict[str, str]]


@dataclass(frozen=True, slots=True)
class Drift:
    """One locked input that differs now: where, what, and the locked and current values."""

    node: str
    key: str
    locked: str | None  # None: not in the lock
    now: str | None  # None: no longer there

    @property
    def what(self) -> str:
        """The input in words: the model's file, the vLLM build, the kernel."""
        return describe(self.key)

    def text(self) -> str:
        """One line: node, what, locked value, current value."""
        locked, now = self.locked or "(not locked)", self.now or "(gone)"
        return f"{self.node}: {self.what}: {locked} in the lock, {now} now"


def entries(inputs: Mapping[str, Any]) -> dict[str, str]:
    """One node's lockable inputs (a receipt's node entry) as flat `key: value`, sorted."""
    out: dict[str, str] = {}
    vllm = inputs.get("vllm") or {}
    prefix = "image" if "image_id" in vllm else "vllm"
    for key, value in vllm.items():
        if key != "image":
            out[f"{prefix}.{key}"] = _flat(value)
    for label, model in (inputs.get("models") or {}).items():
        out[f"{label}.digest"] = _flat(model.get("digest"))
        out.update({f"{label}.file {rel}": sha for rel, sha in model.get("files", {}).items()})
    for key, value in (inputs.get("host") or {}).items():
        out[f"host.{key}"] = _flat(value)
    return dict(sorted(out.items()))


def lock_text(nodes: Mapping[str, Mapping[str, str]], cluster: str) -> str:
    """The lock file: a header, then each node's entries (nodes in the order given)."""
    parts = [HEADER + f"# cluster: {cluster}\n"]
    for node, found in nodes.items():
        lines = [f"[{node}]", *(f"{_word(k)} = {_word(v)}" for k, v in found.items())]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def parse_lock(text: str, source: str) -> Lock:
    """The lock file's entries by node; LockError naming the line that cannot be read."""
    nodes: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = nodes.setdefault(line[1:-1], {})
            continue
        parsed = _pair(line)
        if current is None or parsed is None:
            raise LockError(
                f"{source}:{number}: cannot read {line[:60]!r}",
                "a lock file holds [node] sections of `key = value` lines; "
                "`spark-launch lock SPEC` rewrites it",
            )
        current[parsed[0]] = parsed[1]
    return Lock(source, nodes)


def drift(lock: Mapping[str, Mapping[str, str]], now: Mapping[str, Mapping[str, str]]) -> list[Drift]:
    """Every locked input that differs on the nodes now, node by node (a node added or dropped too)."""
    out = []
    for node in [*lock, *(n for n in now if n not in lock)]:
        if node not in now or node not in lock:
            out.append(
                Drift(
                    node,
                    "node",
                    "in the lock" if node in lock else None,
                    "in the spec" if node in now else None,
                )
            )
            continue
        locked, found = lock[node], now[node]
        moved = [k for k in sorted(set(locked) | set(found)) if locked.get(k) != found.get(k)]
        named = {k.partition(".file ")[0] for k in moved if ".file " in k}  # its files say more
        out += [
            Drift(node, k, locked.get(k), found.get(k))
            for k in moved
            if k.removesuffix(".digest") not in named
        ]
    return out


def describe(key: str) -> str:
    """A lock key in words."""
    if key == "node":
        return "the node"
    area, _, rest = key.partition(".")
    if rest.startswith("file "):
        return f"{area.replace('_', ' ')} file {rest[5:]}"
    words = {
        "vllm.build": "vLLM build (fingerprint of its files)",
        "vllm.release": "vLLM release",
        "vllm.commit": "vLLM commit",
        "vllm.python": "python",
        "vllm.torch": "torch",
        "image.image_id": "image id",
        "image.repo_digests": "image repo digests",
        "host.kernel": "kernel",
        "host.os": "OS",
        "host.gpus": "GPUs",
        "host.driver": "GPU driver",
    }
    return words.get(key, f"{area.replace('_', ' ')} {rest}" if rest else key)


def drift_summary(found: Sequence[Drift], shown: int = 8) -> list[str]:
    """The drift as lines, the first `shown` in full and the rest counted."""
    lines = [d.text() for d in found[:shown]]
    if len(found) > shown:
        lines.append(f"... and {len(found) - shown} more")
    return lines


def _flat(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "(none)"
    return str(value)


def _word(text: str) -> str:
    """Written as is when it reads back the same, else as a JSON string."""
    return text if PLAIN.match(text) and " = " not in text and text == text.strip() else json.dumps(text)


def _pair(line: str) -> tuple[str, str] | None:
    """(key, value) of a `key = value` line, either side possibly a JSON string."""
    key, rest = _read_word(line, " = ")
    if key is None or not rest.startswith(" = "):
        return None
    value, tail = _read_word(rest[3:], "")
    return (key, value) if value is not None and not tail.strip() else None


def _read_word(text: str, stop: str) -> tuple[str | None, str]:
    if text.startswith('"'):
        try:
            word, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            return None, text
        return (word, text[end:]) if isinstance(word, str) else (None, text)
    if not stop:
        return text, ""
    head, sep, _ = text.partition(stop)
    return (head, text[len(head) :]) if sep else (None, text)
