"""The scripts sent to the nodes, one per job, and how they travel.

Each script is standalone Python (standard library only, 3.8 or newer) run on the node as
`python3 - NAME DIR ARGS...` with its source on stdin, so nothing is installed on the nodes.
`common.py` holds what they share; `bundle` inlines it in front of the script. The probe
runs under the node's own vLLM install instead (`probe.py` imports vLLM).
"""

from __future__ import annotations

import functools
from pathlib import Path

HERE = Path(__file__).parent
COMMON_IMPORT = "from launcher.node.scripts.common import"
FUTURE = "from __future__ import annotations"
NAMES = ("start", "status", "stop", "logs", "lock", "facts", "net", "probe", "image")


@functools.cache
def bundle(name: str) -> str:
    """The source sent for node script `name`: common.py inlined in front of it when it uses it."""
    if name not in NAMES:
        raise ValueError(f"no node script named {name!r}")
    text = (HERE / f"{name}.py").read_text()
    if COMMON_IMPORT not in text:
        return text
    body, skipping = [], False
    for line in text.splitlines():
        if line.startswith(COMMON_IMPORT):  # the import of common, one line or parenthesised
            skipping = line.split("#")[0].rstrip().endswith("(")
        elif skipping:
            skipping = not line.startswith(")")
        elif line != FUTURE:
            body.append(line)
    return (HERE / "common.py").read_text() + f"\n\n# ---- {name}.py\n" + "\n".join(body) + "\n"
