"""The scripts sent to the nodes, one per job, and how they travel.

Each script is standalone Python (standard library only, 3.8 or newer) run on the node as
`python3 -S -c STAGE NAME DIR ARGS...` with its source on stdin, after the loader's line
(`loader.py`: it keeps the source, and the node's Python its bytecode, for the next call), so
nothing is installed on the nodes.
Libraries (`common.py`, `inputs.py`, `installed.py`, `memory.py`, `tree.py`, `traits.py`,
`rdma.py`, `hostinfo.py`, `rsh.py`) hold what several scripts share, and a script may also borrow
functions from another script (`from launcher.node.scripts.check_facts import ...`): `bundle`
inlines what a script imports in front of it, each module once, a borrowed script without its
command-line entry. The probe, the catalog generator and the preflight run under the node's
own vLLM install instead (`probe.py`, `catalog.py` and `traits.py` import vLLM,
`preflight.py` torch).
A script's start imports only what every call of it needs: every node pays it on every call.
Names used in annotations only come under `if TYPE_CHECKING:` (`typing` alone costs a node
2 ms), and what one rare path needs is imported in that path's function.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

HERE = Path(__file__).parent
SIBLING = re.compile(r"from launcher\.node\.scripts\.(\w+) import")
FUTURE = "from __future__ import annotations"
ENTRY = 'if __name__ == "__main__":'
NAMES = (
    "start",
    "rank_status",
    "watch",
    "stop",
    "log_tail",
    "cluster_lock",
    "check_facts",
    "net",
    "probe",
    "discover",
    "manifest",
    "transfer",
    "prepare",
    "image",
    "imagecopy",
    "drop",
    "gather",
    "stacks",
    "planning",
    "learn_catalog",
    "preflight",
    "k8s_gate",
)
# No entry of their own: only ever inlined.
LIBRARIES = ("common", "inputs", "installed", "memory", "tree", "traits", "rdma", "hostinfo", "rsh")
LOADER = "loader"  # sent ahead of a script, as one line (`loader_line`)


@functools.cache
def bundle(name: str) -> str:
    """The source sent for node script `name`: the modules it imports inlined in front of it."""
    if name not in NAMES:
        raise ValueError(f"no node script named {name!r}")
    parts: list[str] = []
    _inline(name, parts, set(), entry=True)
    return "\n\n".join(parts) + "\n"


@functools.cache
def loader_line() -> str:
    """The first line of a script call's stdin: the loader, which reads and runs the rest."""
    return f"exec({(HERE / f'{LOADER}.py').read_text()!r})\n"


def tag(name: str) -> str:
    """A short hash of what is sent for script `name`: its version, for caches keyed by it."""
    return hashlib.sha256(bundle(name).encode()).hexdigest()[:16]


def _inline(name: str, parts: list[str], done: set[str], entry: bool) -> None:
    """Append module `name` to `parts` after the modules it imports, each once (a borrowed
    script without its entry)."""
    done.add(name)
    body: list[str] = []
    skipping = False
    for line in (HERE / f"{name}.py").read_text().splitlines():
        found = SIBLING.match(line)
        if not entry and line.startswith(ENTRY):
            break
        if found:  # the import of another module, one line or parenthesised
            if found.group(1) not in done:
                _inline(found.group(1), parts, done, entry=False)
            skipping = line.split("#")[0].rstrip().endswith("(")
        elif skipping:
            skipping = not line.startswith(")")
        elif line != FUTURE:
            body.append(line)
    head = [FUTURE] if not parts else []
    label = "" if entry or name in LIBRARIES else " (borrowed)"
    parts.append("\n".join([*head, f"# ---- {name}.py{label}", *body]))
