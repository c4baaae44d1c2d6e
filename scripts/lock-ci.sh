#!/usr/bin/env bash
# Rewrite requirements/ci.lock: the launcher's dependencies and its dev tools (pyproject.toml:
# dependencies, the `dev` extra, the build backend), each pinned to one version with the sha256
# of each wheel pip downloads for it (scripts/lock.py), through the package index this machine's
# pip uses. `make dev` (and so CI) installs that file with hashes required, then the launcher
# itself with --no-deps. Review the diff before committing it. Usage: scripts/lock-ci.sh
# Targets: CI's and the developers' machines (x86_64, CPython 3.11) and DGX OS (aarch64 and
# x86_64, CPython 3.12); another: CI_TARGETS="x86_64-3.11 ... NEW" scripts/lock-ci.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
mapfile -t requirements < <(python3 - "$root/pyproject.toml" <<'PY'
import sys, tomllib  # Python 3.11 or newer
with open(sys.argv[1], "rb") as f:
    data = tomllib.load(f)
for requirement in [*data["build-system"]["requires"], *data["project"]["dependencies"],
                    *data["project"]["optional-dependencies"]["dev"]]:
    print(requirement)
PY
)


read -r -a targets <<<"${CI_TARGETS:-x86_64-3.11 x86_64-3.12 aarch64-3.12}"
args=()
for t in "${targets[@]}"; do args+=(--target "$t"); done
title="The launcher's dependencies, its dev tools and its build backend, for CI and \`make dev\`:
every package pinned, wheels only, every file hashed (CPU-CPython, below: targets).
pip install --require-hashes --no-deps --only-binary :all: -r requirements/ci.lock"
python3 "$here/lock.py" "$root/requirements/ci.lock" "${requirements[@]}" "${args[@]}" \
  --glibc "${GLIBC:-2.35}" --title "$title" --command "scripts/lock-ci.sh"
