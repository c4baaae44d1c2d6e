"""Vendor LeaderWorkerSet's published OpenAPI schema for the tests, from the CRD of an LWS release.

    python scripts/lws_schema.py leaderworkerset.x-k8s.io_leaderworkersets.yaml > \
        tests/data/lws/leaderworkerset-v1.schema.json

Takes the `v1` version's openAPIV3Schema as the CRD publishes it and drops only the
`description` texts (five sixths of the file, and never a constraint); tests/data/lws/README.md
records the release, its commit and where the CRD came from.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml


def without_descriptions(node: Any) -> Any:
    """`node` with every `description` key removed, at any depth."""
    if isinstance(node, dict):
        return {k: without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [without_descriptions(v) for v in node]
    return node


def main(crd_path: str) -> int:
    """Print the v1 schema of the CRD at `crd_path` as JSON."""
    with open(crd_path) as f:
        crd = yaml.safe_load(f)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = without_descriptions(version["schema"]["openAPIV3Schema"])
    print(json.dumps(schema, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
