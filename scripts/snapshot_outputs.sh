#!/usr/bin/env bash
# Records what the planner answers for a fixed set of commands, so that a change meant to move code, not
# answers, can be checked by diffing two snapshots: `plan check` on every committed measurement file, a set
# of sweeps over every profile, model family, precision and parallel layout (over 2,000 rows of CSV), and
# `plan --json` for 50 varied configurations.
# Usage: bash scripts/snapshot_outputs.sh PLAN_BINARY OUT_DIR
#   then: diff -r OUT_DIR_before OUT_DIR_after
set -uo pipefail
cd "$(dirname "$0")/.."
plan=${1:?usage: snapshot_outputs.sh PLAN_BINARY OUT_DIR}
out=${2:?usage: snapshot_outputs.sh PLAN_BINARY OUT_DIR}
mkdir -p "$out/check" "$out/sweep" "$out/json"

# 1. plan check on every committed collector report (exit codes kept beside the text).
for f in data/measurements/*.jsonl tests/data/measurements/pytorch-hf-h100-2026-11-22.jsonl; do
  name=$(basename "$f" .jsonl)
  extra=()
  case "$name" in *shared*) extra=(--one-process) ;; esac
  "$plan" check "${extra[@]}" "$f" >"$out/check/$name.txt" 2>&1
  echo "exit $?" >>"$out/check/$name.txt"
done

# 2. Sweeps: each profile over families, precisions, recomputation and layouts.
sweep() {
  local name=$1; shift
  # (the summary's seconds and path differ from run to run: left out)
  "$plan" sweep --quiet --threads 1 "$@" -o "$out/sweep/$name.csv" 2>&1 | sed -E 's# in [0-9.]+ s$##; s#written to .*/#written to #' >"$out/sweep/$name.log"
  echo "exit ${PIPESTATUS[0]}" >>"$out/sweep/$name.log"
}
sweep hf-gpt2 --framework hf --model gpt2,gpt2-medium --seq 256,1024 --micro-batch 1,4 --grad-accum 1,2 \
  --precision amp-bf16,bf16,fp32 --recompute none,full --attention eager,flash --dropout 0,0.1
sweep hf-llama --framework hf --model tinyllama-1.1b,llama-3.2-1b,qwen2.5-0.5b --seq 512,2048 --micro-batch 1,2 \
  --precision amp-bf16,bf16 --recompute none,full --attention eager,flash --optimizer adamw,adafactor,adamw-8bit
sweep hf-7b --framework hf --model llama-2-7b,mistral-7b,phi-3-mini,gemma-2-9b --seq 1024,4096 --micro-batch 1,2 \
  --precision amp-bf16,bf16 --recompute none,full --optimizer adamw,lion
sweep hf-lora --framework hf --model llama-2-7b,llama-3.1-8b --finetune lora --seq 512,2048 --micro-batch 1,4 \
  --precision bf16,amp-bf16 --recompute none,full
sweep hf-qlora --framework hf --model llama-2-13b --finetune qlora --seq 1024,4096 --micro-batch 1,2 --recompute none,full
sweep hf-moe --framework hf --model mixtral-8x7b,qwen3-30b-a3b --seq 1024,4096 --micro-batch 1,2 --precision bf16 \
  --recompute none,full --gpus 8 --zero 3
for zero in 0 1 2 3; do
  sweep "hf-zero$zero" --framework hf --model llama-3.1-8b --seq 2048,4096 --micro-batch 1,2 --gpus 8 --zero $zero \
    --recompute none,full --precision amp-bf16,bf16 --optimizer-impl fused
done
for layout in "8 8 1" "64 8 2" "64 8 4" "64 4 4" "32 2 1"; do
  read -r gpus tp pp <<<"$layout"
  sweep "megatron-g${gpus}-tp${tp}-pp${pp}" --framework megatron --model llama-2-7b,llama-2-70b,llama-3.1-70b \
    --seq 2048,4096 --micro-batch 1,2 --grad-accum 8,16 --gpus "$gpus" --tp "$tp" --pp "$pp" --zero 1 \
    --recompute none,selective,full --precision megatron-bf16,fp8-mixed
done
sweep megatron-sp --framework megatron --model llama-2-13b,qwen2.5-72b --seq 4096,8192 --micro-batch 1 --grad-accum 8 \
  --gpus 64 --tp 8 --pp 2 --sequence-parallel --zero 0 --recompute none,selective,full --attention eager,flash
for layout in "64 8 1 1" "64 8 2 4" "256 32 1 1"; do
  read -r gpus ep tp pp <<<"$layout"
  sweep "megatron-moe-g${gpus}-ep${ep}-tp${tp}-pp${pp}" --framework megatron --model mixtral-8x7b,qwen3-30b-a3b \
    --seq 4096 --micro-batch 1,2 --grad-accum 8 --gpus "$gpus" --ep "$ep" --tp "$tp" --pp "$pp" --zero 1 \
    --recompute none,full --capacity-factor dropless
done
sweep megatron-deepseek --framework megatron --model deepseek-v3 --seq 4096 --micro-batch 1 --grad-accum 8 \
  --gpus 256 --ep 32 --zero 1 --recompute none,full
for gpus in 1 4; do
  sweep "llmc-g$gpus" --framework llmc --model gpt2,gpt2-medium,gpt2-xl --seq 256,1024 --micro-batch 1,8,16 \
    --grad-accum 1,4 --recompute none,selective,full --precision bf16-mixed,fp32 --gpus $gpus --zero $((gpus > 1))
done
for offload in none optimizer; do
  sweep "trainplan-$offload" --framework trainplan --model gpt2,tinyllama-1.1b,llama-2-7b --seq 512,2048 \
    --micro-batch 1,4 --grad-accum 1,2 --precision bf16-mixed,fp16-mixed,fp32 --recompute none,selective,full \
    --attention eager,flash --offload $offload
done

# 3. plan --json for 50 configurations.
i=0
while IFS= read -r line; do
  [ -z "$line" ] && continue
  i=$((i + 1))
  # shellcheck disable=SC2086
  "$plan" $line --json >"$out/json/$(printf '%02d' $i).json" 2>&1
  echo "exit $? :: $line" >>"$out/json/index.txt"
done <<'CONFIGS'
--params 7B --seq 4096 --gpu h100
--model gpt2 --seq 1024 --micro-batch 4
--model gpt2 --seq 1024 --micro-batch 4 --dropout 0.1 --attention eager
--model gpt2 --seq 1024 --micro-batch 8 --precision bf16 --recompute full
--model gpt2-medium --seq 1024 --micro-batch 8 --grad-accum 4
--model tinyllama-1.1b --seq 2048 --micro-batch 2
--model tinyllama-1.1b --seq 2048 --micro-batch 4 --precision bf16 --optimizer-impl fused
--model llama-3.2-1b --seq 4096 --micro-batch 2 --recompute full
--model llama-3.2-3b --seq 4096 --micro-batch 2 --finetune lora
--model llama-3.1-8b --seq 4096 --finetune qlora --gpu rtx-4090
--model llama-3.1-8b --seq 8192 --precision bf16 --recompute full --expandable-segments
--model llama-3.1-8b --seq 4096 --gpus 8 --zero 3
--model llama-3.1-8b --seq 4096 --gpus 8 --fsdp full --recompute full --micro-batch 2
--model llama-2-7b --seq 4096 --gpus 8 --zero 2 --optimizer adamw-8bit
--model llama-2-7b --seq 4096 --offload optimizer
--model llama-2-13b --seq 4096 --finetune lora --lora-rank 64 --lora-targets q,k,v,o,mlp
--model llama-2-70b --seq 4096 --gpus 64 --zero 3 --recompute full
--model llama-3.1-70b --seq 8192 --gpus 64 --tp 8 --pp 4 --framework megatron --grad-accum 16
--model llama-3.1-70b --seq 8192 --gpus 64 --tp 8 --pp 2 --framework megatron --grad-accum 16 --sequence-parallel
--model llama-3.1-405b --seq 8192 --gpus 16384 --tp 8 --pp 2 --framework megatron --grad-accum 16 --recompute full
--model llama-3.1-405b --seq 1048576 --gpus 16384 --tp 8 --pp 2 --framework megatron --recompute full --grad-accum 16
--model mixtral-8x7b --seq 4096 --gpus 8 --zero 3 --precision bf16
--model mixtral-8x7b --seq 4096 --gpus 16 --ep 8 --framework megatron
--model mixtral-8x22b --seq 4096 --gpus 64 --ep 8 --tp 2 --framework megatron --grad-accum 8
--model qwen3-30b-a3b --seq 4096 --gpus 8 --ep 8 --framework megatron --capacity-factor 1.25
--model deepseek-v3 --seq 4096 --gpus 256 --ep 32 --framework megatron --grad-accum 32 --recompute full
--model qwen2.5-0.5b --seq 2048 --micro-batch 8
--model qwen2.5-7b --seq 4096 --precision bf16 --recompute full
--model qwen2.5-72b --seq 4096 --gpus 64 --zero 3 --recompute full
--model gemma-2-9b --seq 4096 --precision bf16 --recompute full
--model phi-3-mini --seq 4096 --micro-batch 2
--model mistral-7b --seq 8192 --precision bf16 --recompute full --attention eager
--model gpt2 --seq 1024 --micro-batch 16 --framework llmc
--model gpt2-xl --seq 1024 --micro-batch 8 --framework llmc --recompute full
--model gpt2-medium --seq 1024 --micro-batch 16 --framework llmc --gpus 4 --zero 1
--model gpt2 --seq 1024 --micro-batch 4 --framework trainplan
--model tinyllama-1.1b --seq 2048 --micro-batch 2 --framework trainplan --precision fp16-mixed
--model gpt2 --seq 512 --micro-batch 4 --framework trainplan --precision fp32 --attention eager --dropout 0.1
--model llama-2-7b --seq 4096 --framework megatron --precision fp8-mixed --gpus 8 --tp 8
--model llama-2-7b --seq 4096 --framework megatron --gpus 8 --tp 4 --sequence-parallel --recompute selective
--model gpt3-175b --seq 2048 --framework megatron --gpus 1024 --tp 8 --pp 8 --grad-accum 32 --recompute selective
--model llama-3.1-8b --seq 4096 --tokens 1T --gpus 64 --zero 1
--model llama-2-7b --seq 4096 --optimizer sgd-momentum --precision bf16
--model llama-2-7b --seq 2048 --precision fp32 --gpu a100-80gb
--model llama-2-7b --seq 4096 --gpu h200
--model llama-2-7b --seq 4096 --gpu b200 --micro-batch 4
--model llama-3.1-8b --seq 2048 --finetune lora --lora-dropout 0.05 --gpu l40s
--model gpt2 --seq 1024 --micro-batch 8 --precision amp-fp16
--layers 24 --hidden 2048 --heads 16 --vocab 50000 --seq 2048 --micro-batch 4
--params 1.5B --seq 1024 --micro-batch 8 --gpu a10g
CONFIGS
echo "snapshot written to $out"
