#!/usr/bin/env bash
# Builds trainplan (installing missing packages) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
# Say why GPU tests were skipped, if they were (the reason is in ctest's log).
grep -h "^SKIPPED:" build/Testing/Temporary/LastTest.log 2>/dev/null || true
