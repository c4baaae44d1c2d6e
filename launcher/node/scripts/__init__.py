"""The scripts sent to the nodes, one per job, and how they travel.

Each script is standalone Python (standard library only, 3.8 or newer) run on the node as
`python3 - NAME DIR ARGS...` with its source on stdin, so nothing is installed on the nodes.
`common.py` holds what they share; `bundle` inlines it in front of the script. A script may
also borrow functions from another script (`from launcher.node.scripts.facts import ...`):
`bundle` inlines that script too, without its command-line entry. The probe runs under the
node's own vLLM install instead (`probe.py` imports vLLM).
"""

from __future__ import annotations

import functools
from pathlib import Path

HERE = Path(__file__).parent
SCRIPT_IMPORT = "from launcher.node.scripts."
COMMON_IMPORT = SCRIPT_IMPORT + "common import"
FUTURE = "from __future__ import annotations"
ENTRY = 'if __name__ == "__main__":'
NAMES = ("start", "status", "stop", "logs", "lock", "facts", "net", "probe", "discover")


@functools.cache
def bundle(name: str) -> str:
    """The source sent for node script `name`: what it imports from other scripts inlined in front."""
    if name not in NAMES:
        raise ValueError(f"no node script named {name!r}")
    text = (HERE / f"{name}.py").read_text()
    if SCRIPT_IMPORT not in text:
        return text
    order: list[str] = []
    _dependencies(name, order)
    parts = [(HERE / "common.py").read_text()] if "common" in order else []
    for dep in order:
        if dep not in ("common", name):
            parts.append(f"\n\n# ---- {dep}.py (borrowed)\n" + _body(dep, library=True))
    parts.append(f"\n\n# ---- {name}.py\n" + _body(name, library=False))
    return "".join(parts)


def _imported(text: str) -> list[str]:
    """The node scripts a script imports from, in order of appearance."""
    return [
        line[len(SCRIPT_IMPORT) :].split()[0] for line in text.splitlines() if line.startswith(SCRIPT_IMPORT)
    ]


def _dependencies(name: str, order: list[str]) -> None:
    """Append `name`'s script dependencies (depth first), then `name`, each once."""
    for dep in _imported((HERE / f"{name}.py").read_text()):
        if dep not in order:
            _dependencies(dep, order)
    if name not in order:
        order.append(name)


def _body(name: str, library: bool) -> str:
    """A script's source without its imports of other scripts (and, for a library, its entry)."""
    body, skipping = [], False
    for line in (HERE / f"{name}.py").read_text().splitlines():
        if library and line.startswith(ENTRY):
            break
        if line.startswith(SCRIPT_IMPORT):  # one line or parenthesised
            skipping = line.split("#")[0].rstrip().endswith("(")
        elif skipping:
            skipping = not line.startswith(")")
        elif line != FUTURE:
            body.append(line)
    return "\n".join(body) + "\n"
