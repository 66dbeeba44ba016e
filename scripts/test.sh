#!/usr/bin/env bash
# Builds trainplan (installing missing packages) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# Every Catch2 test case must be exactly one ctest entry: a name with ';' or a leading '-' would be split
# or misread as an option and silently run nothing.
cases=$({ build/tests/trainplan_tests --list-test-names-only || true; } | grep -c .)  # Catch2 v2 exits with the count
if { build/tests/trainplan_tests --list-test-names-only || true; } | grep -q '^-'; then
  echo "test names: a Catch2 test name starts with '-', which ctest passes as an option: rename it" >&2
  exit 1
fi
entries=$(ctest --test-dir build -N | grep -c "Test *#" || true)
gpu_entries=$(ctest --test-dir build -N -R '^gpu_' | grep -c "Test *#" || true)
if [ "$cases" -ne "$((entries - gpu_entries))" ]; then
  echo "test names: $cases Catch2 test cases but $((entries - gpu_entries)) ctest entries (look for ';' or a leading '-')" >&2
  exit 1
fi
ctest --test-dir build --output-on-failure -j "$(nproc)"
# Say why GPU tests were skipped, if they were (the reason is in ctest's log).
grep -h "^SKIPPED:" build/Testing/Temporary/LastTest.log 2>/dev/null || true
