#!/usr/bin/env bash
# Everything this project needs a GPU for, in one run, in the order that pays most for device time:
# the kernel tests, the per-kernel benchmark, the harness benchmark, the validation suite and its
# calibration, then the Hugging Face collector (issue 9's further runs) checked with `plan check`.
# Each stage has its own time limit, so one that hangs does not take the others' time; a failed stage
# is reported and the next one runs. Everything measured lands in OUT_DIR (default reports/gpu-session),
# and OUT_DIR.tar.gz holds it all, for machines that return one file (collect-shared's allocator histories:
# OUT_DIR-history.tar.gz).
#
#   bash scripts/gpu_session.sh [OUT_DIR] [STAGE...]   (after a build: cmake -S . -B build && cmake --build build)
#
# STAGE: gpu-tests, bench-kernels, bench, suite (with calibrate), collect (with check), collect-shared (the
# shared 14 again with --profile, then check); all by default. A machine that allows ten minutes a command
# takes them in three or four calls (gpu-tests bench-kernels bench; suite; collect; collect-shared). Stage limits in seconds: TESTS_S, KERNELS_S, BENCH_S, SUITE_S, COLLECT_S.
set -uo pipefail
cd "$(dirname "$0")/.."

out="${1:-reports/gpu-session}"
shift || true
stages="${*:-gpu-tests bench-kernels bench suite collect collect-shared}"
wants() { [[ " $stages " == *" $1 "* ]]; }
mkdir -p "$out"
log="$out/session.log"
touch "$log"
plan=build/plan
[ -x "$plan" ] || { echo "build/plan is missing: build first (cmake -S . -B build && cmake --build build)" >&2; exit 2; }

stage() {  # stage NAME LIMIT_S COMMAND...: runs it under a time limit, its output in OUT_DIR/NAME.txt
  local name="$1" limit="$2"
  shift 2
  local start=$SECONDS
  echo "== $name (limit ${limit}s): $*" | tee -a "$log"
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s" | tee -a "$log"
  tail -n 25 "$out/$name.txt"
  return 0
}

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
wants gpu-tests && stage gpu-tests "${TESTS_S:-240}" build/tests/trainplan_gpu_tests
# bench.json and kernels.json go apart from the suite's reports: calibrate reads every .json of its folder.
wants bench-kernels && stage bench-kernels "${KERNELS_S:-120}" "$plan" bench --backend cuda --kernels --report-dir "$out/bench"
wants bench && stage bench "${BENCH_S:-220}" "$plan" bench --backend cuda --report-dir "$out/bench"
if wants suite; then
  stage suite "${SUITE_S:-500}" "$plan" validate --suite gpu --report-dir "$out/suite"
  suite_dir=$(ls -d "$out"/suite/*/ 2>/dev/null | head -n 1)
  [ -n "$suite_dir" ] && stage calibrate 60 "$plan" calibrate "$suite_dir"
fi
if wants collect && command -v python3 >/dev/null && python3 -c "import torch, transformers" 2>/dev/null; then
  stage collect "${COLLECT_S:-500}" python3 scripts/collect_hf.py --preset extra --profile -o "$out/collected.jsonl"
  [ -s "$out/collected.jsonl" ] && stage check 60 "$plan" check "$out/collected.jsonl"
fi
# The shared 14 again, profiled: GPU busy time and kernels per step against step_s, which tells a run bound
# by the host from one bound by the GPU (issue 10's S5: gradient checkpointing costs GPT-2 35%, Llama nothing).
if wants collect-shared && command -v python3 >/dev/null && python3 -c "import torch, transformers" 2>/dev/null; then
  # The allocator's history of every run (issue 9's S5 and S10 reserved bytes), in its own archive: it is larger.
  stage collect-shared "${COLLECT_S:-500}" python3 scripts/collect_hf.py --preset shared-h100 --profile \
    --memory-history "$out-history" -o "$out/shared-profiled.jsonl"
  [ -d "$out-history" ] && tar -czf "$out-history.tar.gz" -C "$(dirname "$out")" "$(basename "$out")-history"
  [ -s "$out/shared-profiled.jsonl" ] && stage check-shared 60 "$plan" check "$out/shared-profiled.jsonl"
fi

tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
echo "everything measured: $out (and $out.tar.gz)" | tee -a "$log"
