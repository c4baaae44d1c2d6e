#!/usr/bin/env python3
"""Write the catalog of the vLLM installed in the running interpreter, as JSON.

    VENV/bin/python scripts/gen_catalog.py OUT.json    # (`make catalogs` for the committed ones)

The generator is a node script, launcher/node/scripts/learn_catalog.py: the launcher runs it on
the head node, whose own vLLM answers, for a build without a committed catalog. This runs it
exactly as a container on a node does: from the launcher's unit, carried on stdin and checked
against its sha256 (`core.stubs.CARRY_STUB`), under this interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# The unit's builder imports only the standard library: safe in any vLLM venv.
from launcher.core.stubs import CARRY_STUB
from launcher.node.unit import unit_line, unit_sha

if __name__ == "__main__":
    argv = [sys.executable, "-c", CARRY_STUB, unit_sha(), "learn_catalog", *sys.argv[1:]]
    sys.exit(subprocess.run(argv, input=unit_line(), text=True, check=False).returncode)
