#!/usr/bin/env bash
# Build (or reuse) a cached venv holding the endpoint's router: LiteLLM's proxy, pinned exactly
# (launcher/core/endpoint_plan.py, ROUTER_PIN). Usage: scripts/router-venv.sh [VERSION] -> prints the path.
# On a node: run it there (python3 and PyPI), then set endpoint.venv to the path it prints
# (or copy the venv to a path of your choice with the same Python).
# The cache key is the version plus this script's own hash: a second run is instant.
set -euo pipefail
version=${1:-1.106.12}
cache=${SPARK_LAUNCH_CACHE:-$HOME/.cache/spark-launch}
here=$(cd "$(dirname "$0")" && pwd)
key=$(sha256sum "$here/router-venv.sh" | cut -c1-12)
venv="$cache/venvs/router-litellm-$version-$key"
python=${PYTHON:-python3}

if [ -f "$venv/.complete" ]; then echo "$venv"; exit 0; fi
rm -rf "$venv"
mkdir -p "$cache/venvs"
"$python" -m venv "$venv" >&2
"$venv/bin/pip" install -q --upgrade pip >&2
# 1.107.0 was a compromised release (withdrawn); later releases need packages this index lacks.
"$venv/bin/pip" install -q "litellm[proxy]==$version" >&2
"$venv/bin/python" -c 'import importlib.metadata as m, sys; v = m.version("litellm"); sys.exit(0 if v == sys.argv[1] else v)' "$version"
touch "$venv/.complete"
echo "$venv"
