#!/usr/bin/env bash
# Everything this project needs a GPU for, in one run, in the order that pays most for device time
# (whatever order the stages are named in): the kernel tests, the allocator histories of the reserved-bytes
# gaps, the per-kernel benchmark, the harness benchmark, the validation suite and its calibration, then the
# Hugging Face collector's further runs, checked with `plan check`.
# Each stage has its own time limit, so one that hangs does not take the others' time; a failed stage
# is reported and the next one runs. Everything measured lands in OUT_DIR (default reports/gpu-session),
# and OUT_DIR.tar.gz holds it all, packed again after every stage, for machines that return one file and
# may stop a command at its time limit (collect-shared's allocator histories: OUT_DIR-history.tar.gz).
# When RETURN_DIR is set (a device machine's $OUT), both archives are copied there after every stage.
#
#   bash scripts/gpu_session.sh [OUT_DIR] [STAGE...]
#
# Binaries: BIN_DIR, else gpu-carry/ when it exists (scripts/gpu_bundle.sh: the three binaries and libfmt in
# one xz archive, small enough to send to a device machine, which build/ is not; unpacked here), else build/. A device machine's command,
# with gpu-carry named in its carry:
#
#   RETURN_DIR=$OUT bash scripts/gpu_session.sh /tmp/gs gpu-tests bench-kernels bench
#
# STAGE: gpu-tests, sanitize (compute-sanitizer's memcheck and racecheck on the flash tests, when the mma kernels
# failed theirs), bench-kernels, bench, profile (ncu on the mma flash kernels and the norm backward; not in the
# default list), suite (with calibrate), collect (the extra preset, with check),
# collect-lora (E12 and E13 of the extra preset, and S6, with the allocator's history: the LoRA runs the
# replay missed, and the run that settles the order of AdamW's first states),
# collect-gaps (S1, S5 and S10 of the shared 14 with the allocator's history: the reserved-bytes gaps and a run
# that matches, then check and the history set beside the replay's segments), collect-shared (all 14 so, and
# profiled), collect-new (what the planner has not been measured on yet: --preset compile with the allocator's
# history, --preset packing, each checked; not in the default list); all but collect-gaps and collect-new by default. Stage limits in seconds: TESTS_S, KERNELS_S, BENCH_S, SUITE_S,
# COLLECT_S, GAPS_S, LORA_S, SANITIZE_S, PROFILE_S. The GPU's entry in data/gpus.json (for --gpu) comes from nvidia-smi's name, or GPU=NAME.
#
# `one-call` is the plan for a session lent 15 minutes of device time (the machine's start included) and
# ten minutes a command: gpu-tests (and sanitize, when the mma flash test fails), bench-kernels, bench, suite
# (with calibrate: the arena's new placement and the longer timing, measured again), profile, in that order
# (what settles most first), each under its limit (TESTS_S=60 KERNELS_S=45 BENCH_S=150 SUITE_S=180
# PROFILE_S=60 unless set) and all within DEADLINE_S=570 seconds of the script's start: a stage gets at most
# what is left before it (less 15 s to pack), so a run with timeout_s 600 returns everything measured. Stages
# stopped at their limit still return what they wrote: the collector appends a line a run, the bench
# rewrites bench.json after each run, the suite its summary. The collector runs the configurations of
# `--preset extra` named in COLLECT_ONLY (comma-separated ids), all of them when it is empty. Every extra
# configuration (E1-E21) and the histories of S1, S5, S6, S10, E12 and E13 were measured on 2026-11-26.
# DEADLINE_S applies to any list of stages where it is set.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

out="${1:-reports/gpu-session}"
out="${out%/}"  # OUT_DIR/ would put OUT_DIR.tar.gz inside the folder it packs
[ -n "$out" ] || { echo "gpu_session.sh: OUT_DIR must not be /" >&2; exit 2; }
shift || true
stages="${*:-gpu-tests bench-kernels bench suite collect collect-shared}"
if [ "$stages" = "one-call" ]; then
  stages="gpu-tests sanitize bench-kernels bench suite profile"
  : "${TESTS_S:=60}" "${KERNELS_S:=45}" "${BENCH_S:=150}" "${SUITE_S:=180}" "${PROFILE_S:=60}" "${DEADLINE_S:=570}"
fi
for s in $stages; do
  case "$s" in
    gpu-tests | sanitize | bench-kernels | bench | profile | suite | collect | collect-gaps | collect-lora | collect-shared | collect-new) ;;
    *) echo "gpu_session.sh: unknown stage '$s' (known: gpu-tests sanitize bench-kernels bench profile suite collect collect-gaps collect-lora collect-shared collect-new, or one-call alone)" >&2; exit 2 ;;
  esac
done
wants() { [[ " $stages " == *" $1 "* ]]; }

bin="${BIN_DIR:-}"
# gpu_bundle.sh's archive, unpacked where it lies (once).
if [ -z "$bin" ] && [ -f gpu-carry/bundle.tar.xz ] && [ ! -x gpu-carry/plan ]; then
  tar -xJf gpu-carry/bundle.tar.xz -C gpu-carry || { echo "gpu_session.sh: gpu-carry/bundle.tar.xz does not unpack" >&2; exit 3; }
fi
if [ -z "$bin" ]; then
  if [ -x gpu-carry/plan ]; then bin="gpu-carry"; else bin="build"; fi
fi
plan="$bin/plan"
gpu_tests="$bin/trainplan_gpu_tests"
[ -x "$gpu_tests" ] || gpu_tests="$bin/tests/trainplan_gpu_tests"
[ -x "$plan" ] || { echo "$plan is missing: build first (cmake -S . -B build && cmake --build build), then bash scripts/gpu_bundle.sh" >&2; exit 2; }
# libfmt beside the binaries (gpu_bundle.sh), and CUDA 13's libraries wherever this machine's toolkit keeps them.
export LD_LIBRARY_PATH="$bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=0
for f in "$plan" "$bin/libtrainplan_cuda_backend.so" "$gpu_tests"; do
  [ -e "$f" ] || { echo "gpu_session.sh: $f is missing" >&2; missing=1; continue; }
  if ldd "$f" | grep -q 'not found'; then
    echo "gpu_session.sh: $f cannot load: $(ldd "$f" | grep 'not found' | tr -s ' \t\n' ' ')" >&2
    missing=1
  fi
done
[ "$missing" -eq 0 ] || exit 3

mkdir -p "$out"
log="$out/session.log"
touch "$log"

# The catalog's name for this GPU, so that the suite is sized, and the bench's MFU taken, for the GPU it runs on.
gpu="${GPU:-}"
if [ -z "$gpu" ]; then
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)" in
    *H200*) gpu=h200 ;;
    *H100*PCIe*) gpu=h100-pcie ;;
    *H100*) gpu=h100 ;;
    *A100*80GB*) gpu=a100-80gb ;;
    *A100*) gpu=a100-40gb ;;
    *) gpu=h100 ;;
  esac
fi
echo "== GPU: $gpu ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)); binaries: $bin" | tee -a "$log"

pack() {  # OUT_DIR.tar.gz (and the histories') now, and a copy in RETURN_DIR
  tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null
  [ -d "$out-history" ] && tar -czf "$out-history.tar.gz" -C "$(dirname "$out")" "$(basename "$out")-history" 2>/dev/null
  if [ -n "${RETURN_DIR:-}" ]; then
    cp "$out.tar.gz" "$RETURN_DIR/" 2>/dev/null
    [ -f "$out-history.tar.gz" ] && cp "$out-history.tar.gz" "$RETURN_DIR/" 2>/dev/null
  fi
  return 0
}

stage() {  # stage NAME LIMIT_S COMMAND...: runs it under a time limit, its output in OUT_DIR/NAME.txt
  local name="$1" limit="$2"
  shift 2
  if [ -n "${DEADLINE_S:-}" ]; then  # what is left before the deadline, less the time to pack
    local left=$((DEADLINE_S - SECONDS - 15))
    if [ "$left" -lt 10 ]; then
      echo "== $name: skipped (${DEADLINE_S} s deadline, ${SECONDS} s gone)" | tee -a "$log"
      return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
  fi
  local start=$SECONDS
  echo "== $name (limit ${limit}s): $*" | tee -a "$log"
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s" | tee -a "$log"
  tail -n 25 "$out/$name.txt"
  pack
  return 0
}

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
wants gpu-tests && stage gpu-tests "${TESTS_S:-150}" "$gpu_tests"
# The mma.sync flash kernels (the default) were written without a GPU at hand: if their test failed (Catch2
# prints the failing section's "flash kernels mma" message), the stages after run the WMMA kernels instead,
# so the bench and the suite still measure a working harness.
if [ -f "$out/gpu-tests.txt" ] && grep -q "flash kernels mma" "$out/gpu-tests.txt" && [ -z "${TRAINPLAN_FLASH_KERNEL:-}" ]; then
  export TRAINPLAN_FLASH_KERNEL=wmma
  echo "== the mma flash kernels failed their test: TRAINPLAN_FLASH_KERNEL=wmma from here on" | tee -a "$log"
  # What to fix before the next session: out-of-bounds accesses, then shared-memory races, in the flash tests.
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
  if wants sanitize && [ -n "$sanitizer" ]; then
    stage memcheck "${SANITIZE_S:-60}" "$sanitizer" --tool memcheck --print-limit 20 "$gpu_tests" "[flash]"
    stage racecheck "${SANITIZE_S:-60}" "$sanitizer" --tool racecheck --print-limit 20 "$gpu_tests" "[flash]"
  fi
fi
# The runs whose reserved bytes the replay misses (S5 +12.7%, S10 -6.1%) and one it matches (S1), with the
# allocator's history: the measured segments, in order, beside the replay's.
if wants collect-gaps && command -v python3 >/dev/null && python3 -c "import torch, transformers" 2>/dev/null; then
  stage collect-gaps "${GAPS_S:-90}" python3 scripts/collect_hf.py --preset shared-h100 --only S1,S5,S10 \
    --memory-history "$out-history" -o "$out/gaps.jsonl"
  [ -s "$out/gaps.jsonl" ] && stage check-gaps 30 "$plan" check --gpu "$gpu" "$out/gaps.jsonl" \
    --segments-out "$out/replay-gaps.jsonl"
  [ -s "$out/replay-gaps.jsonl" ] && [ -d "$out-history" ] &&
    stage compare-gaps 30 python3 scripts/compare_allocator_history.py "$out-history" "$out/replay-gaps.jsonl"
fi
# bench.json and kernels.json go apart from the suite's reports: calibrate reads every .json of its folder.
wants bench-kernels && stage bench-kernels "${KERNELS_S:-90}" "$plan" bench --backend cuda --kernels --gpu "$gpu" --report-dir "$out/bench"
wants bench && stage bench "${BENCH_S:-240}" "$plan" bench --backend cuda --gpu "$gpu" --report-dir "$out/bench"
# ncu on the kernels that stand furthest from their roofline: one forward and one backward of the mma flash
# kernels (after the --kernels bench's warm-up and nine timed forwards), and one norm backward with its
# partials' sum. The arena is capped (TRAINPLAN_ARENA_BYTES) so that ncu's save and restore around each
# replayed kernel moves 2 GiB, not the whole GPU (with it, ncu did not finish one kernel in 45 s).
if wants profile; then
  ncu_bin=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -n 1)
  sections="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
  if [ -n "$ncu_bin" ]; then
    # shellcheck disable=SC2086  # $sections is a list of options
    stage profile-flash "${PROFILE_S:-60}" env TRAINPLAN_ARENA_BYTES=2G "$ncu_bin" --kernel-name regex:mma_kernel \
      --launch-skip 10 --launch-count 3 $sections "$plan" bench --backend cuda --kernels --gpu "$gpu" --report-dir "$out/profile"
    # shellcheck disable=SC2086
    stage profile-norm "${PROFILE_S:-60}" env TRAINPLAN_ARENA_BYTES=2G "$ncu_bin" --kernel-name "regex:norm_backward_warp|norm_partials_sum" \
      --launch-skip 2 --launch-count 2 $sections "$plan" bench --backend cuda --kernels --gpu "$gpu" --report-dir "$out/profile"
  fi
fi
if wants suite; then
  stage suite "${SUITE_S:-480}" "$plan" validate --suite gpu --gpu "$gpu" --report-dir "$out/suite"
  suite_dir=$(ls -d "$out"/suite/*/ 2>/dev/null | head -n 1)
  [ -n "$suite_dir" ] && stage calibrate 60 "$plan" calibrate --gpu "$gpu" "$suite_dir"
fi
# The two LoRA runs whose reserved bytes the replay missed (E12 +5.6%, now -2.9%; E13 -10.1%), with the allocator's
# history, as S10's history showed the buffer the profile lacked; and S6 of the shared 14, whose replay regrows
# one more loss segment when AdamW's states are made parameter by parameter as S1's history shows PyTorch does.
if wants collect-lora && command -v python3 >/dev/null && python3 -c "import torch, transformers, peft" 2>/dev/null; then
  stage collect-s6 30 python3 scripts/collect_hf.py --preset shared-h100 --only S6 \
    --memory-history "$out-history" -o "$out/lora.jsonl"
  stage collect-lora "${LORA_S:-90}" python3 scripts/collect_hf.py --preset extra --only E12,E13 \
    --memory-history "$out-history" -o "$out/lora.jsonl"
  [ -s "$out/lora.jsonl" ] && stage check-lora 30 "$plan" check --gpu "$gpu" "$out/lora.jsonl" \
    --segments-out "$out/replay-lora.jsonl"
  [ -s "$out/replay-lora.jsonl" ] && [ -d "$out-history" ] &&
    stage compare-lora 30 python3 scripts/compare_allocator_history.py "$out-history" "$out/replay-lora.jsonl"
fi
if wants collect && command -v python3 >/dev/null && python3 -c "import torch, transformers" 2>/dev/null; then
  stage collect "${COLLECT_S:-480}" python3 scripts/collect_hf.py --preset extra ${COLLECT_ONLY:+--only "$COLLECT_ONLY"} \
    --profile -o "$out/collected.jsonl"
  [ -s "$out/collected.jsonl" ] && stage check 60 "$plan" check --gpu "$gpu" "$out/collected.jsonl"
fi
# The shared 14 again, profiled: GPU busy time and kernels per step against step_s, which tells a run bound
# by the host from one bound by the GPU (S5: gradient checkpointing costs GPT-2 35%, Llama nothing).
if wants collect-shared && command -v python3 >/dev/null && python3 -c "import torch, transformers" 2>/dev/null; then
  # The allocator's history of every run (S5's and S10's reserved bytes), in its own archive: it is larger.
  stage collect-shared "${COLLECT_S:-480}" python3 scripts/collect_hf.py --preset shared-h100 --profile \
    --memory-history "$out-history" -o "$out/shared-profiled.jsonl"
  [ -s "$out/shared-profiled.jsonl" ] && stage check-shared 60 "$plan" check --gpu "$gpu" "$out/shared-profiled.jsonl" \
    --segments-out "$out/replay-segments.jsonl"
  # Segment by segment, in order: PyTorch's recorded history beside the replay's (where S5 and S10 part).
  [ -s "$out/replay-segments.jsonl" ] && [ -d "$out-history" ] &&
    stage compare-history 60 python3 scripts/compare_allocator_history.py "$out-history" "$out/replay-segments.jsonl"
fi

# Compiled steps and packed documents: measured so that their models can be built (compile) and checked
# (packing). plan check lists the compiled lines as not predicted and compares the eager ones beside them.
if wants collect-new && command -v python3 >/dev/null && python3 -c "import torch, transformers" 2>/dev/null; then
  stage collect-compile "${COMPILE_S:-240}" python3 scripts/collect_hf.py --preset compile --profile \
    --memory-history "$out-history" -o "$out/compile.jsonl"
  [ -s "$out/compile.jsonl" ] && stage check-compile 30 "$plan" check --gpu "$gpu" "$out/compile.jsonl"
  stage collect-packing "${PACKING_S:-120}" python3 scripts/collect_hf.py --preset packing -o "$out/packing.jsonl"
  [ -s "$out/packing.jsonl" ] && stage check-packing 30 "$plan" check --gpu "$gpu" "$out/packing.jsonl"
fi

pack
echo "everything measured: $out (and $out.tar.gz)" | tee -a "$log"
