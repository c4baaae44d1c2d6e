#!/usr/bin/env bash
# `make test`: run each named make target in turn (setup, lint, fast, conformance, e2e), timed.
# A failing tier does not stop the later ones (CI shows every failure at once), except setup:
# nothing runs without what it installs. At the end the time of each tier and the total are
# printed and written to $TEST_TIMES (build/test-times.txt), which CI prints into its log.
# Exit status: 0 when every tier passed, else 1.
set -uo pipefail
cd "$(dirname "$0")/.."
times=${TEST_TIMES:-build/test-times.txt}
mkdir -p "$(dirname "$times")"

clock() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

rows=()
failed=0
began_all=$SECONDS
for tier in "$@"; do
  began=$SECONDS
  echo "==> make $tier" >&2
  make --no-print-directory "$tier"
  code=$?
  verdict=ok
  [ "$code" -eq 0 ] || { verdict="FAILED (exit $code)"; failed=1; }
  rows+=("$(printf '%-12s %8s  %s' "$tier" "$(clock $((SECONDS - began)))" "$verdict")")
  if [ "$tier" = setup ] && [ "$code" -ne 0 ]; then break; fi
done
{
  echo "make test: time per tier"
  printf '%s\n' "${rows[@]}"
  printf '%-12s %8s\n' total "$(clock $((SECONDS - began_all)))"
} | tee "$times"
echo "(written to $times)"
exit "$failed"
