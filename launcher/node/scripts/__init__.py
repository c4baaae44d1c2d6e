"""The scripts sent to the nodes, one per job, and how they travel.

Each script is standalone Python (standard library only, 3.8 or newer) run on the node as
`python3 - NAME DIR ARGS...` with its source on stdin, so nothing is installed on the nodes.
Libraries (`common.py`, `inputs.py`, `installed.py`, `memory.py`) hold what several scripts
share; `bundle` inlines the ones a script imports in front of it. The probe runs under the node's own vLLM
install instead (`probe.py` imports vLLM).
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

HERE = Path(__file__).parent
SIBLING = re.compile(r"from launcher\.node\.scripts\.(\w+) import")
FUTURE = "from __future__ import annotations"
NAMES = ("start", "status", "watch", "stop", "logs", "lock", "facts", "net", "probe", "drop", "gather")
LIBRARIES = ("common", "inputs", "installed", "memory")  # inlined into the scripts that import them


@functools.cache
def bundle(name: str) -> str:
    """The source sent for node script `name`: the libraries it imports inlined in front of it."""
    if name not in NAMES:
        raise ValueError(f"no node script named {name!r}")
    parts: list[str] = []
    _inline(name, parts, set())
    return "\n\n".join(parts) + "\n"


def tag(name: str) -> str:
    """A short hash of what is sent for script `name`: its version, for caches keyed by it."""
    return hashlib.sha256(bundle(name).encode()).hexdigest()[:16]


def _inline(name: str, parts: list[str], done: set[str]) -> None:
    """Append module `name` to `parts` after the libraries it imports, each once."""
    done.add(name)
    body: list[str] = []
    skipping = False
    for line in (HERE / f"{name}.py").read_text().splitlines():
        found = SIBLING.match(line)
        if found:  # the import of a library, one line or parenthesised
            if found.group(1) not in done:
                _inline(found.group(1), parts, done)
            skipping = line.split("#")[0].rstrip().endswith("(")
        elif skipping:
            skipping = not line.startswith(")")
        elif line != FUTURE:
            body.append(line)
    head = [FUTURE] if not parts else []
    parts.append("\n".join([*head, f"# ---- {name}.py", *body]))
