#!/usr/bin/env bash
# Build (or reuse) a venv holding the endpoint's router: LiteLLM's proxy and every package it
# needs, installed from router-requirements.txt (beside this script) alone: each pinned to one
# version, wheels only, every file checked against its recorded sha256 (pip refuses any other
# file, and any package the file does not name). scripts/lock-router.sh rewrites that file.
# Both ship with spark-launch: `spark-launch up` sends them to the head node and runs this there
# when the spec gives no endpoint.venv (into ~/.spark-launch/router/, keyed by the lock's hash).
# Usage: router-venv.sh [--where] [--venv PATH] [--requirements FILE]
#   prints the venv's path (--where: the path only, nothing built). Without --venv: a venv cached
#   under $SPARK_LAUNCH_CACHE (~/.cache/spark-launch), keyed by LiteLLM's version, the Python's
#   and the hash of this script and the requirements file: a second run is instant, a new lock
#   builds anew. pip must reach a package index from where it runs (its own configuration:
#   PIP_INDEX_URL, a mirror, PIP_FIND_LINKS with PIP_NO_INDEX for a folder of wheels).
set -euo pipefail
where=no venv= requirements=
while [ $# -gt 0 ]; do
  case "$1" in
    --where) where=yes; shift ;;
    --venv) venv=$2; shift 2 ;;
    --requirements) requirements=$2; shift 2 ;;
    *) echo "router-venv.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
cache=${SPARK_LAUNCH_CACHE:-$HOME/.cache/spark-launch}
here=$(cd "$(dirname "$0")" && pwd)
requirements=${requirements:-$here/router-requirements.txt}
[ -f "$requirements" ] || { echo "router-venv.sh: $requirements is missing: copy it beside this script" >&2; exit 1; }
version=$(sed -n 's/^litellm==\([^ ]*\) .*/\1/p' "$requirements")
[ -n "$version" ] || { echo "router-venv.sh: no litellm pin in $requirements" >&2; exit 1; }
python=${PYTHON:-python3}
python_version=$("$python" -c 'import sys; print("py%d.%d" % sys.version_info[:2])' </dev/null)
target="$(uname -m)-${python_version#py}"
case " $(sed -n 's/^# targets: //p' "$requirements") " in
  *" $target "*) ;;
  *) echo "router-venv.sh: $requirements has no wheels for $target (CPU-Python): lock them with" \
       "ROUTER_TARGETS=\"... $target\" scripts/lock-router.sh, or set PYTHON to a Python it has" >&2; exit 1 ;;
esac
if [ -z "$venv" ]; then
  key=$(cat "$here/router-venv.sh" "$requirements" | sha256sum | cut -c1-12)
  venv="$cache/venvs/router-litellm-$version-$python_version-$key"
fi

if [ "$where" = yes ] || [ -f "$venv/.complete" ]; then echo "$venv"; exit 0; fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" >&2 </dev/null
# The venv's own pip (the one its Python ships): nothing is installed but what the file names.
"$venv/bin/python" -m pip install -q --require-hashes --no-deps --only-binary :all: -r "$requirements" >&2 </dev/null
"$venv/bin/python" -m pip check >&2 </dev/null
"$venv/bin/python" -c 'import importlib.metadata as m, sys; v = m.version("litellm"); sys.exit(0 if v == sys.argv[1] else v)' "$version" </dev/null
touch "$venv/.complete"
echo "$venv"
