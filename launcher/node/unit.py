"""The code that runs on the nodes as one versioned unit: `node/scripts/` zipped, its sha256 its version.

The unit is a zip application (PEP 441): the package's modules under one top-level package,
`core.stubs.UNIT_PACKAGE`, plus a `__main__.py` that runs `python3 UNIT.pyz SCRIPT ARGS...`.
It is built byte for byte the same from the same sources (names sorted, fixed timestamps and
permissions, stored uncompressed so that no zlib version changes a byte, and a node's
zipimport needs no zlib either), so its sha256 names it: a node keeps it as
~/.spark-launch/agent/<sha256>.pyz, and every call's stub runs it only after hashing it
(`core.stubs.RUN_STUB`). Built once per launcher process, in about a millisecond
(bench/unit_calls.py). The Kubernetes export puts `unit_bytes()` in a ConfigMap under
`unit_sha()`'s name.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import io
import zipfile
from pathlib import Path

from launcher.core.stubs import UNIT_PACKAGE

SCRIPTS = Path(__file__).parent / "scripts"
STAMP = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold: no build time in the bytes
MODE = 0o100644  # a regular file, rw-r--r--, whoever built it with whatever umask
MAIN = f'''"""python3 UNIT.pyz SCRIPT ARGS...: node script SCRIPT, run as __main__ with ARGS."""
import runpy
import sys

runpy.run_module("{UNIT_PACKAGE}." + sys.argv[1], run_name="__main__", alter_sys=True)
'''


def sources() -> dict[str, bytes]:
    """The unit's files by their name in it: every module of node/scripts, and the entry."""
    found = {f"{UNIT_PACKAGE}/{p.name}": p.read_bytes() for p in SCRIPTS.glob("*.py")}
    return {**found, "__main__.py": MAIN.encode()}


@functools.cache
def unit_bytes() -> bytes:
    """The unit, as every launcher with these sources builds it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in sorted(sources().items()):
            info = zipfile.ZipInfo(name, STAMP)
            info.create_system = 3  # Unix, so that the mode below is read as one
            info.external_attr = MODE << 16
            archive.writestr(info, data)
    return buffer.getvalue()


@functools.cache
def unit_sha() -> str:
    """The unit's sha256, in hex: its version, its name on the nodes."""
    return hashlib.sha256(unit_bytes()).hexdigest()


@functools.cache
def unit_line() -> str:
    """The unit as a call carries it on stdin: base64, one line (`core.stubs.CARRY_STUB`)."""
    return base64.b64encode(unit_bytes()).decode() + "\n"


@functools.cache
def tag(name: str) -> str:
    """A short hash of node script `name` and of the modules it imports: the version of what it
    computes, for caches of its answers that must outlive unit versions that did not change it
    (the probe's)."""
    digest = hashlib.sha256()
    for module in sorted(_reached(name, set())):
        digest.update(module.encode() + b"\0" + (SCRIPTS / f"{module}.py").read_bytes())
    return digest.hexdigest()[:16]


def _reached(name: str, seen: set[str]) -> set[str]:
    """Module `name` and every sibling it imports (relative imports), at any depth."""
    seen.add(name)
    for node in ast.walk(ast.parse((SCRIPTS / f"{name}.py").read_bytes())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and node.module not in seen:
            _reached(node.module, seen)
    return seen
