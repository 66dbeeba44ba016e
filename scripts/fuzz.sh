#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) into build-fuzz/ and runs each for
# SECONDS_PER_TARGET seconds, one after another, from its seed corpus (fuzz/corpus/<target>/, read-only) and
# what earlier runs found (build-fuzz/corpus/<target>/). Prints per target the runs executed, exec/s, corpus
# size, coverage and whether it found something; the input of a finding goes to build-fuzz/findings/.
# Exit status 1 when any target found something (or did not run), 0 otherwise.
# Usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 180 s; targets: all in fuzz/)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-180}
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
all_targets=(quantities sweep_axis hf_config catalog measured_runs)
targets=("${@:2}")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
done

bash scripts/build.sh --deps-only clang libclang-rt-14-dev
cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
cmake --build build-fuzz -j "$(nproc)" >&2

mkdir -p build-fuzz/findings build-fuzz/logs
findings=0
printf '%-14s %8s %12s %9s %8s %7s %8s  %s\n' target seconds runs exec/s corpus cov ft finding
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  log=build-fuzz/logs/$t.log
  mkdir -p "$corpus"
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  before=$(find build-fuzz/findings -name "$t-*" | wc -l)
  start=$(date +%s)
  status=0
  # -timeout: a unit slower than 10 s is a hang; -rss_limit_mb: one that needs 2 GiB is a finding too.
  "build-fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/findings/$t-" "${dict[@]}" "$corpus" "fuzz/corpus/$t" >"$log" 2>&1 || status=$?
  elapsed=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  after=$(find build-fuzz/findings -name "$t-*" | wc -l)
  if [ "$status" -ne 0 ] || [ "$after" -gt "$before" ]; then
    findings=$((findings + 1))
    what=$(grep -m1 -E 'FUZZ FINDING|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error' "$log" || echo "exit status $status")
    result="YES: $what (log $log; inputs build-fuzz/findings/$t-*)"
  else
    result=no
  fi
  printf '%-14s %8s %12s %9s %8s %7s %8s  %s\n' "$t" "$elapsed" "${runs:-?}" "${rate:-?}" "${corp:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
if [ "$findings" -gt 0 ]; then
  echo "fuzz: $findings target(s) found something" >&2
  exit 1
fi
echo "fuzz: no findings"
