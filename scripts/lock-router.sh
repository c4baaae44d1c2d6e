#!/usr/bin/env bash
# Rewrite launcher/catalogs/router-requirements.txt: the endpoint's router (LiteLLM's proxy) and every
# package it needs, each pinned to one version with the sha256 of each wheel pip downloads
# for it (scripts/lock.py), through the package index this machine's pip uses. Review the
# diff before committing it. launcher/catalogs/router-venv.sh installs from that file alone (here, and
# on the head node when `up` builds the endpoint's router: both ship with the launcher).
# Usage: scripts/lock-router.sh [VERSION]   (default: the version locked now)
# Targets: the CPU and the python3 of the nodes that run the router (router-venv.sh
# builds with the node's python3): x86_64 with CPython 3.11 (Debian 12, the test bed, CI),
# aarch64 with CPython 3.12 (DGX OS on a Spark: Ubuntu 24.04), x86_64 with CPython 3.12
# (Ubuntu 24.04 on a PC). Another kind of node: name every target, the new one too:
#   ROUTER_TARGETS="x86_64-3.11 aarch64-3.12 x86_64-3.12 aarch64-3.11" scripts/lock-router.sh
# GLIBC (default 2.35, Ubuntu 22.04) is the oldest C library a node runs: no wheel needing a
# newer one is chosen. LiteLLM 1.107.0 was a compromised release (withdrawn): never lock it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../launcher/catalogs/router-requirements.txt"
current=$(sed -n 's/^litellm==\([^ ]*\) .*/\1/p' "$out" 2>/dev/null || true)
version=${1:-$current}
[ -n "$version" ] || { echo "usage: scripts/lock-router.sh VERSION (nothing is locked yet)" >&2; exit 2; }
[ "$version" != 1.107.0 ] || { echo "lock-router.sh: litellm 1.107.0 was a compromised release" >&2; exit 2; }
read -r -a targets <<<"${ROUTER_TARGETS:-x86_64-3.11 aarch64-3.12 x86_64-3.12}"
args=()
for t in "${targets[@]}"; do args+=(--target "$t"); done
title="The endpoint's router: litellm[proxy]==$version and every package it needs, wheels only,
for Linux nodes (CPU-CPython, below: targets). router-venv.sh (beside it) installs from this file
with pip install --require-hashes --no-deps --only-binary :all: (no other file, no other package).
Another kind of node: add it to ROUTER_TARGETS and run scripts/lock-router.sh (its header says how)."
# async-timeout: redis needs it on a Python before 3.11.3 (Debian 12's python3 is 3.11.2), and pip
# evaluates that marker with the locking Python's full version, not the target's: named here.
# HOLD=1: keep the versions the lock pins now, and add only what is new.
[ -z "${HOLD:-}" ] || { cp "$out" "$out.held"; args+=(--hold "$out.held"); }
trap 'rm -f "$out.held"' EXIT
python3 "$here/lock.py" "$out" "litellm[proxy]==$version" async-timeout "${args[@]}" \
  --glibc "${GLIBC:-2.35}" --title "$title" --command "scripts/lock-router.sh $version"
