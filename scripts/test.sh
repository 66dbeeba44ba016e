#!/usr/bin/env bash
# Builds trainplan (installing missing packages) and runs the whole test suite (what CI runs: .ci/run).
# bash scripts/test.sh --fast: builds the test binary and runs the unit-labelled tests alone (ctest -L unit: no
# `plan` run, no committed measurement read; tests/CMakeLists.txt gives the labels), in seconds.
# bash scripts/test.sh --sanitize: the same suite built with g++'s AddressSanitizer and UndefinedBehavior-
# Sanitizer in build-sanitize/ (CUDA off); any sanitizer report, from the tests or a `plan` they run, fails it.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: bash scripts/test.sh [--fast | --sanitize]" >&2
  exit 2
}
mode=all
[ $# -le 1 ] || usage
case "${1:-}" in
  "") ;;
  --fast) mode=fast ;;
  --sanitize) mode=sanitize ;;
  *) usage ;;
esac

# Every Catch2 test case must be exactly one ctest entry: a name with ';' or a leading '-' would be split
# or misread as an option and silently run nothing. And every entry must carry a label (unit, measured, cli
# or gpu), or `--fast` and `ctest -L` would pass over it unseen.
check_test_entries() {
  local cases entries other_entries unlabelled
  cases=$({ build/tests/trainplan_tests --list-test-names-only || true; } | grep -c .)  # Catch2 v2 exits with the count
  if { build/tests/trainplan_tests --list-test-names-only || true; } | grep -q '^-'; then
    echo "test names: a Catch2 test name starts with '-', which ctest passes as an option: rename it" >&2
    exit 1
  fi
  # (The entries that are not Catch2 cases are named gpu_* and script_*.)
  entries=$(ctest --test-dir build -N | grep -c "Test *#" || true)
  other_entries=$(ctest --test-dir build -N -R '^(gpu|script)_' | grep -c "Test *#" || true)
  if [ "$cases" -ne "$((entries - other_entries))" ]; then
    echo "test names: $cases Catch2 test cases but $((entries - other_entries)) ctest entries (look for ';' or a leading '-')" >&2
    exit 1
  fi
  unlabelled=$(ctest --test-dir build -N -LE '^(unit|measured|cli|gpu)$' | grep -c "Test *#" || true)
  if [ "$unlabelled" -ne 0 ]; then
    echo "test labels: $unlabelled ctest entries have none of unit, measured, cli, gpu (tests/CMakeLists.txt):" >&2
    ctest --test-dir build -N -LE '^(unit|measured|cli|gpu)$' | grep "Test *#" >&2
    exit 1
  fi
}

if [ "$mode" = fast ]; then
  bash scripts/build.sh --deps-only
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build build -j "$(nproc)" --target trainplan_tests >&2
  check_test_entries
  ctest --test-dir build --output-on-failure -j "$(nproc)" -L '^unit$'
  exit 0
fi

if [ "$mode" = sanitize ]; then
  bash scripts/build.sh --deps-only
  # float-cast-overflow is not part of g++'s -fsanitize=undefined; no recovery, so every report fails.
  flags="-fsanitize=address,undefined -fsanitize=float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer"
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=g++ -DTRAINPLAN_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >&2
  cmake --build build-sanitize -j "$(nproc)" >&2
  # A report from a `plan` a test runs must not be lost in the test's captured output: every sanitizer exits
  # 86, which no test expects of plan (a test expecting exit 1 would take ASan's default for "does not
  # fit"); ASan writes its reports here, and since g++'s libubsan ignores log_path beside libasan, the
  # tests' run_plan copies a UBSan report from plan's stderr here too (TRAINPLAN_SANITIZER_LOGS).
  logs="$PWD/build-sanitize/sanitizer-logs"
  rm -rf "$logs" && mkdir -p "$logs"
  export TRAINPLAN_SANITIZER_LOGS="$logs"
  export ASAN_OPTIONS="log_path=$logs/report:exitcode=86:detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1"
  export UBSAN_OPTIONS="exitcode=86:print_stacktrace=1:halt_on_error=1"
  status=0
  ctest --test-dir build-sanitize --output-on-failure -j "$(nproc)" || status=$?
  if compgen -G "$logs/*" >/dev/null; then
    echo "sanitizer reports ($logs):" >&2
    cat "$logs"/* >&2
    status=1
  fi
  [ "$status" -eq 0 ] && echo "sanitizers: clean (ASan + UBSan, no reports)"
  exit "$status"
fi

bash scripts/build.sh
check_test_entries
ctest --test-dir build --output-on-failure -j "$(nproc)"
# Say why GPU tests were skipped, if they were (the reason is in ctest's log).
grep -h "^SKIPPED:" build/Testing/Temporary/LastTest.log 2>/dev/null || true
