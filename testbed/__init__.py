"""A real multi-node test bed on one Linux machine: network namespaces, sshd, a CPU vLLM.

Run it as `python -m testbed up|down|status|model|bind|unbind` (root needed). Stdlib only,
so it works before the project's own dependencies are installed.
"""

from __future__ import annotations

from testbed.bed import bind_mount, down, status, unbind_mount, up
from testbed.errors import TestbedError
from testbed.layout import DEFAULT_DIR, Layout, Node

__all__ = [
    "DEFAULT_DIR",
    "Layout",
    "Node",
    "TestbedError",
    "bind_mount",
    "down",
    "status",
    "unbind_mount",
    "up",
]
