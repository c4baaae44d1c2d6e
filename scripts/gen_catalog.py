#!/usr/bin/env python3
"""Write the catalog of the vLLM installed in the running interpreter, as JSON.

    VENV/bin/python scripts/gen_catalog.py OUT.json    # (`make catalogs` for the committed ones)

The generator is a node script, launcher/node/scripts/learn_catalog.py: the launcher sends it to
the head node, whose own vLLM answers, for a build without a committed catalog. This runs
exactly what is sent (the script with its libraries inlined, `bundle("learn_catalog")`), here.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from launcher.node.scripts import bundle  # standard library only: safe in any vLLM venv

if __name__ == "__main__":
    sys.argv = ["-", *sys.argv[1:]]  # as `python - OUT.json` reads its arguments
    exec(compile(bundle("learn_catalog"), "<learn_catalog.py as sent>", "exec"), {"__name__": "__main__"})
