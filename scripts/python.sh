#!/usr/bin/env bash
# The Python that the launcher's venv and the vLLM venvs are made with: $PYTHON when set,
# else python3.11 or python3.12, whichever this machine has with its venv module (Debian 12
# ships 3.11; DGX OS, on Ubuntu 24.04, ships 3.12). Prints its name; `make system-deps`
# installs one where there is none.
set -euo pipefail
usable() { command -v "$1" >/dev/null 2>&1 && "$1" -c 'import ensurepip, venv' 2>/dev/null; }
if [ -n "${PYTHON:-}" ]; then
  usable "$PYTHON" || { echo "python.sh: PYTHON=$PYTHON cannot make a venv (no such command, or no venv module)" >&2; exit 1; }
  echo "$PYTHON"
  exit 0
fi
for python in python3.11 python3.12; do
  if usable "$python"; then echo "$python"; exit 0; fi
done
echo "python.sh: no python3.11 or python3.12 with its venv module here: run \`make system-deps\` (root)" >&2
exit 1
