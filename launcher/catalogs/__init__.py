"""The catalogs of the supported vLLM releases: data generated from each real package.

`vllm-<release>.json` is written by `scripts/gen_catalog.py` from that release's real
package (its `vllm serve` parser and its model registry; `make catalogs`) and checked
against it by the conformance tier. Adding a release: "Adding a vLLM release" in
CONTRIBUTING.md (`make release VERSION=...`). Any other build's catalog is learned from its own vLLM
on the head node, by the same generator, and kept in the operator's cache (`launcher.cache`).

`review-<release>.json` says what covers each change the release machine (`make release`,
scripts/release.py) found against the release before it: a rule, a row of `check`, the node
scripts, or no effect on the nodes' agreement, each with its reason; `report-<release>.md` is
the machine's report, committed and reproduced by the conformance tier.

The endpoint's router ships here too: its hashed lock (`router-requirements.txt`, written by
`scripts/lock-router.sh`) and the script that installs from it alone (`router-venv.sh`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from launcher.core.spec.versions import parse
from launcher.core.vllm.catalog import Catalog, catalog_from_dict
from launcher.errors import SparkLaunchError

CATALOG_DIR = Path(__file__).parent


def known_versions() -> list[str]:
    """The vLLM releases with a committed catalog, oldest first."""
    names = (p.name.removeprefix("vllm-").removesuffix(".json") for p in CATALOG_DIR.glob("vllm-*.json"))
    return sorted(names, key=parse)


ROUTER_LOCK = CATALOG_DIR / "router-requirements.txt"  # scripts/lock-router.sh writes it
ROUTER_SCRIPT = CATALOG_DIR / "router-venv.sh"  # installs the router from that lock alone


@functools.cache
def router_lock() -> str:
    """The endpoint router's lock: every package pinned, every wheel's sha256."""
    return ROUTER_LOCK.read_text()


@functools.cache
def router_script() -> str:
    """The script that builds the router's venv from its lock (here, and on the head node)."""
    return ROUTER_SCRIPT.read_text()


def router_key() -> str:
    """The router lock's hash (12 hex digits): the key of the venv the launcher builds on the head."""
    return hashlib.sha256(router_lock().encode()).hexdigest()[:12]


@functools.cache
def load_catalog(version: str) -> Catalog:
    """The catalog of a known release; a SparkLaunchError naming the known ones otherwise."""
    if version not in known_versions():
        raise SparkLaunchError(
            f"no flag catalog for vLLM {version}; known: {', '.join(known_versions())}",
            "set vllm.flags_from to the nearest known release to go on at your own risk",
        )
    return catalog_from_dict(json.loads((CATALOG_DIR / f"vllm-{version}.json").read_text()))
