#!/usr/bin/env python3
"""collect_hf.py: measure GPU memory and step time of PyTorch eager + Hugging Face transformers training.

What it measures
----------------
The configurations that trainplan's `--framework hf` profile models, measured the same way as the reference
file tests/data/measurements/pytorch-hf-h100-2026-11-22.jsonl (a copy of the project's shared measurements; definitions: tests/data/measurements/README.md and the fields below).
A model is built from a config with random initialisation (GPT2Config, LlamaConfig, MistralConfig,
Qwen2Config or Phi3Config from the command line flags: no download, no hub access) and trained on random token ids
(`labels = input_ids`) with torch.optim.AdamW(lr=1e-4). One training step is

    for each micro-batch:  out = model(input_ids=x, labels=x)     # forward (under torch.autocast for amp-*)
                                                                  # (--packing: position_ids=... too)
                           out.loss.backward()                    # (scaler.scale(loss).backward() for amp-fp16)
    del out                                                       # the logits are freed before the step
    optimizer.step()                                              # (scaler.step + scaler.update for amp-fp16)
    optimizer.zero_grad(set_to_none=True)

and the figures of the last step (the third by default, as in the reference file) are:

    before_step     torch.cuda.memory_allocated() before the step
    forward_peak    torch.cuda.max_memory_allocated() within the forward (peak stats reset before it)
    after_forward   memory_allocated() after the forward (the output, logits included, still referenced)
    backward_peak   max_memory_allocated() within the backward (reset before it)
    after_backward  memory_allocated() after the backward, read while `out` is still referenced
    optimizer_peak  max_memory_allocated() within the optimizer phase (reset *before* `del out`, then the
                    logits are freed, then optimizer.step(): this is the order the reference rows show, e.g.
                    S3 has optimizer_peak == after_backward while S1/S11/S12 are after_backward - logits +
                    the foreach temporaries)
    alloc_peak      the largest of the three phase peaks
    reserved_peak   torch.cuda.max_memory_reserved() over the training run (stats reset after the model is
                    built and moved to the GPU; a running maximum, since each phase's
                    reset_peak_memory_stats() resets the reserved peak too; read before the inventory pass)
    step_s          median wall time of steps 2..N (N = --steps, 3 by default: steps 2 and 3), each bracketed
                    by torch.cuda.synchronize()
    host_s          {forward, backward, optimizer}: median over steps 2..N of the time each phase's Python calls
                    took to return (model(...); loss.backward(); optimizer.step() and zero_grad()), kernels
                    still queued: a phase whose host_s is close to its share of step_s is bound by the host
    profile         with --profile, one extra step (after the measured ones) under torch.profiler, CUDA
                    activity only: {wall_s, kernels, kernel_s, busy_s, copies, copy_s, kernels_by_name}: kernels
                    launched, their summed time and the union of their intervals (GPU busy time), memcpy/memset
                    apart, and each kernel name (its first 160 characters) with its count and summed seconds,
                    the longest first (which ops the planner's kernel count misses); or
                    {error} when profiling failed (the rest of the line stands)

With --grad-accum K a step has K micro-batches: forward_peak/backward_peak are the maxima over the
micro-batches, after_forward/after_backward those of the last micro-batch (earlier micro-batches drop their
output after their backward).

With --inventory (non-checkpointed runs only) one extra forward is run after the measured steps (so the
phase figures are untouched) and the autograd graph is walked from its loss (grad_fn, next_functions,
breadth first); every `_saved_*` attribute that is a tensor is read and grouped by (op, saved name, dtype,
shape, is a parameter) with `count` references and `unique_bytes` = bytes of storages not met before
(identity: untyped_storage().data_ptr(); a storage shared by several references counts once, at the first
met). "param" means the storage is one of the model's own parameter storages (autocast's bf16 copies are not).
The same extra forward gives `sdpa_backend` (from the grad_fn names) for every sdpa run, checkpointed ones
included (for those only node names are read: reading saved tensors would trigger recomputation).

How to run
----------
    python3 scripts/collect_hf.py --preset shared-h100 -o my-gpu.jsonl      # the 14 reference configurations
    python3 scripts/collect_hf.py --preset extra -o my-gpu.jsonl            # Mistral/Qwen2, fp16, accum, 8k, LoRA, expandable segments
    python3 scripts/collect_hf.py --family llama --layers 4 --hidden 1024 --heads 16 --kv-heads 4 \\
        --ffn 2816 --vocab 32000 --seq 2048 --micro-batch 4 --regime bf16 --inventory -o my-gpu.jsonl
    python3 scripts/collect_hf.py --env-only -o my-gpu.jsonl
    plan check my-gpu.jsonl                         # trainplan's predictions beside these measurements

A preset runs every configuration in a fresh Python process (so runs cannot affect each other) after one
--env-only process that measures the CUDA context once. Needs torch and transformers (and peft for --lora).
Run it on an otherwise idle GPU: context_bytes is read from the device's used memory.

Output
------
JSON lines, appended to -o FILE (stdout without -o), the format of the reference file:

  * the env line (written first when the file is new or empty):
    {"id": "env", "torch", "transformers", "gpu", "gpu_total_bytes", "context_bytes", "cuda", "cudnn", "host_cpu",
     "host_cpus", "note"}
    gpu_total_bytes = torch.cuda.mem_get_info()[1]; context_bytes = device bytes in use after CUDA
    initialisation (total - free) minus torch.cuda.memory_reserved() (README: "what the device had in use
    after CUDA initialisation, less PyTorch's reserved bytes").
  * one line per configuration:
    {"id", "model": {"fam", "L", "h", "a", "kv", "ffn", "V", "tied"[, "max_positions"][, "sliding_window"]}, "seq", "mbs",
     "grad_accum", "regime", "attn", "loss_impl", "packing", "compile", "gc", "drop", "opt", "expandable_segments", ["lora", "lora_targets", "lora_modules", "lora_dtype", "lora_dropout"], "params",
     "trainable_params", "buffer_bytes", "phases": {"before_step", "forward_peak", "after_forward",
     "backward_peak", "after_backward", "optimizer_peak"}, "alloc_peak", "reserved_peak", "step_s",
     "host_s": {"forward", "backward", "optimizer"}, ["profile": {...}], "segments": [[pool, bytes], ...],
     "allocator_counts": {"num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms"}, "torch", "transformers", "gpu", "cuda", ["sdpa_backend"], ["grad_scale", "skipped_steps"],
     ["inventory": [{"op", "saved", "dtype", "shape", "param", "count", "unique_bytes"}, ...]],
     ["memory_history": the path of the allocator's recorded history, with --memory-history]}
    "loss_impl" is the loss the run computed, in `plan --loss`'s names: "standard" (the model's own
    ForCausalLMLoss over labels=input_ids, the only one this collector runs). "packing" is --packing's document
    length in tokens (null: unpacked): each row of --seq tokens holds documents of that many tokens, the last one
    the remainder, their position_ids restarting at 0 (TRL's packing); under flash_attention_2 the micro-batch is
    flattened into one row of mbs x seq tokens (TRL's padding-free collator; transformers finds packed sequences
    from position_ids only at batch size 1), under sdpa each row keeps its own block-diagonal mask.
    "compile" is whether the model ran under torch.compile (--compile: nn.Module.compile, Inductor's default
    mode, after any wrapping); plan check predicts such lines with plan --compile where the stack models the
    compiled layers (else lists them as not compared), and no inventory or SDPA backend is read from them (a
    compiled graph's nodes name neither).
    "expandable_segments" is whether PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF) asked for them
    (--expandable-segments sets it; trainplan replays that allocator for such a line).
    "grad_scale" (amp-fp16) is GradScaler's scale after the run and "skipped_steps" the steps whose
    optimizer.step() it skipped for inf/NaN gradients (its scale fell): trainplan assumes none, since a run
    whose steps were all skipped has no AdamW state.
    "segments" lists the caching allocator's segments after the measured steps ("small" or "large" pool,
    bytes; torch.cuda.memory_snapshot()), largest first: the reserved bytes segment by segment.
    "allocator_counts" has its counters from torch.cuda.memory_stats() at the same point (also on an OOM
    line): num_device_alloc (cudaMalloc calls), num_device_free (cudaFree calls), num_alloc_retries (a failed
    cudaMalloc made it free its cache and try again), num_ooms; those this torch has.
    For gpt2 the model object holds fam, L, h, a, V as in the reference file (ffn only when not 4h,
    max_positions only when not 1024). "params" is the base model's parameter count (tied embeddings once;
    LoRA adapters not included: they are in "trainable_params"). "lora" is the rank (trainplan reads it so);
    "lora_dtype" the adapters' dtype (float32: peft upcasts them; --regime bf16 casts the base before wrapping).
  * a run that runs out of GPU memory still writes its line, with "oom": true, "oom_step", "oom_phase",
    the phases measured before the failure and "reserved_peak"; the exit status is 0 so a sweep continues.

Exit status: 0 (also after an OOM), 2 when torch/transformers/peft or a CUDA device is missing, 1 otherwise.
"""

import argparse
import contextlib
import gc as pygc
import json
import os
import subprocess
import sys
import time

import collect_parallel

FAMILIES = ("gpt2", "llama", "mistral", "qwen2", "phi3")
REGIMES = ("amp-bf16", "amp-fp16", "bf16", "fp32", "bf16-mixed")  # bf16-mixed: --parallel fsdp2 only

# Shapes used when a flag is left out: GPT-2 small, the reference file's small Llama (S6..S10), and small
# Mistral- and Qwen2-shaped models (Mistral-7B's vocab and 3.5x MLP, Qwen2-0.5B's width, heads and vocab).
FAMILY_DEFAULTS = {
    "gpt2": dict(layers=12, hidden=768, heads=12, kv_heads=None, ffn=None, vocab=50257),
    "llama": dict(layers=4, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000),
    "mistral": dict(layers=4, hidden=1024, heads=16, kv_heads=4, ffn=3584, vocab=32768),
    "qwen2": dict(layers=4, hidden=896, heads=14, kv_heads=2, ffn=4864, vocab=151936),
    # Phi-3-mini's vocabulary and full multi-head attention, with the small Llama's width (Phi3Config's fused
    # qkv_proj and gate_up_proj are what the hf profile's phi3 rows model).
    "phi3": dict(layers=4, hidden=1024, heads=16, kv_heads=16, ffn=2816, vocab=32064),
}

GPT2_SMALL = dict(fam="gpt2", L=12, h=768, a=12, V=50257)
GPT2_MEDIUM = dict(fam="gpt2", L=24, h=1024, a=16, V=50257)
LLAMA_SMALL = dict(fam="llama", L=4, h=1024, a=16, kv=4, ffn=2816, V=32000, tied=False)
TINYLLAMA = dict(fam="llama", L=22, h=2048, a=32, kv=4, ffn=5632, V=32000, tied=False)
MISTRAL_SMALL = dict(fam="mistral", L=4, h=1024, a=16, kv=4, ffn=3584, V=32768, tied=False)
QWEN2_SMALL = dict(fam="qwen2", L=4, h=896, a=14, kv=2, ffn=4864, V=151936, tied=True)
PHI3_SMALL = dict(fam="phi3", L=4, h=1024, a=16, kv=16, ffn=2816, V=32064, tied=False)


def _cfg(id_, model, seq, mbs, regime, attn="sdpa", gc=False, drop=0.0, opt="foreach", **extra):
    d = dict(id=id_, model=model, seq=seq, mbs=mbs, regime=regime, attn=attn, gc=gc, drop=drop, opt=opt)
    d.update(extra)
    return d


PRESETS = {
    # The 14 configurations of tests/data/measurements/pytorch-hf-h100-2026-11-22.jsonl, field for field.
    "shared-h100": [
        _cfg("S1", GPT2_SMALL, 1024, 4, "amp-bf16", drop=0.1),
        _cfg("S2", GPT2_SMALL, 1024, 4, "amp-bf16", attn="eager", drop=0.1),
        _cfg("S3", GPT2_SMALL, 1024, 4, "bf16"),
        _cfg("S4", GPT2_SMALL, 1024, 4, "fp32"),
        _cfg("S5", GPT2_SMALL, 1024, 4, "amp-bf16", gc=True, drop=0.1),
        _cfg("S6", LLAMA_SMALL, 2048, 4, "amp-bf16"),
        _cfg("S7", LLAMA_SMALL, 2048, 4, "bf16"),
        _cfg("S8", LLAMA_SMALL, 2048, 4, "bf16", attn="eager"),
        _cfg("S9", LLAMA_SMALL, 2048, 4, "bf16", gc=True),
        _cfg("S10", LLAMA_SMALL, 2048, 4, "fp32"),
        _cfg("S11", TINYLLAMA, 2048, 2, "bf16"),
        _cfg("S12", GPT2_MEDIUM, 1024, 4, "amp-bf16", drop=0.1),
        _cfg("S13", GPT2_SMALL, 1024, 4, "amp-bf16", drop=0.1, opt="fused"),
        _cfg("S14", LLAMA_SMALL, 2048, 4, "bf16", opt="fused"),
    ],
    # What the reference file does not cover: other families, fp16 with GradScaler, gradient accumulation,
    # a long sequence, LoRA. Sized to fit a 40 GB or larger GPU.
    "extra": [
        _cfg("E1", MISTRAL_SMALL, 2048, 4, "bf16"),
        _cfg("E2", MISTRAL_SMALL, 2048, 4, "amp-bf16", gc=True),
        _cfg("E3", QWEN2_SMALL, 2048, 2, "bf16"),
        _cfg("E4", QWEN2_SMALL, 2048, 2, "amp-bf16"),
        _cfg("E5", GPT2_SMALL, 1024, 4, "amp-fp16", drop=0.1),
        _cfg("E6", LLAMA_SMALL, 2048, 4, "amp-fp16"),
        _cfg("E7", GPT2_SMALL, 1024, 2, "amp-bf16", drop=0.1, grad_accum=4),
        _cfg("E8", LLAMA_SMALL, 2048, 1, "bf16", grad_accum=4),
        _cfg("E9", LLAMA_SMALL, 8192, 1, "bf16"),
        _cfg("E10", LLAMA_SMALL, 8192, 1, "bf16", gc=True),
        _cfg("E11", TINYLLAMA, 2048, 2, "bf16", lora=16, lora_targets="q,k,v,o"),
        _cfg("E12", TINYLLAMA, 2048, 2, "bf16", gc=True, lora=16, lora_targets="q,k,v,o"),
        _cfg("E13", GPT2_SMALL, 1024, 4, "amp-bf16", drop=0.1, lora=8, lora_targets="q,k,v,o,mlp"),
        # A sliding window no longer than the sequence (transformers then builds a mask); LoRA over an fp32 base.
        _cfg("E14", dict(MISTRAL_SMALL, sliding_window=4096), 4096, 2, "bf16"),
        _cfg("E15", TINYLLAMA, 2048, 2, "amp-bf16", lora=16, lora_targets="q,k,v,o"),
        # lora_dropout as recipes set it: each adapted linear drops out a copy of its input and keeps the mask.
        _cfg("E16", TINYLLAMA, 2048, 2, "bf16", lora=16, lora_targets="q,k,v,o,mlp", lora_dropout=0.05),
        # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on the shared runs whose default allocator holds the
        # most beyond the tensors (S10, S8) and on the checkpointed one (S5).
        _cfg("E17", LLAMA_SMALL, 2048, 4, "fp32", expandable=True),
        _cfg("E18", LLAMA_SMALL, 2048, 4, "bf16", attn="eager", expandable=True),
        _cfg("E19", GPT2_SMALL, 1024, 4, "amp-bf16", gc=True, drop=0.1, expandable=True),
        # Phi-3's fused projections: one qkv_proj sliced into q, k and v views, one gate_up_proj chunked.
        _cfg("E20", PHI3_SMALL, 2048, 4, "bf16"),
        _cfg("E21", PHI3_SMALL, 2048, 4, "amp-bf16"),
    ],
}
PRESETS["all"] = PRESETS["shared-h100"] + PRESETS["extra"]
# Packed documents (--packing; not in "all"): four documents of 1024 in rows of 4096, under SDPA's block-diagonal
# mask and flash-attn's varlen kernel (which needs the flash-attn package), beside the same rows unpacked.
# Compiled steps (--compile; not in "all"): what Inductor's partitioner keeps for backward and its fused kernels'
# time, beside the same runs eager, without and with gradient checkpointing: the measurements a model of
# torch.compile needs to be checked (plan check predicts them with --compile; the GPT-2 run, whose compiled layers are
# not modelled, it lists as not compared).
PRESETS["compile"] = [
    _cfg("C1", LLAMA_SMALL, 2048, 4, "bf16"),
    _cfg("C2", LLAMA_SMALL, 2048, 4, "bf16", compile=True),
    _cfg("C3", LLAMA_SMALL, 2048, 4, "bf16", gc=True),
    _cfg("C4", LLAMA_SMALL, 2048, 4, "bf16", gc=True, compile=True),
    _cfg("C5", GPT2_SMALL, 1024, 8, "amp-bf16", compile=True),
]
PRESETS["packing"] = [
    _cfg("P1", LLAMA_SMALL, 4096, 1, "bf16"),
    _cfg("P2", LLAMA_SMALL, 4096, 1, "bf16", packing=1024),
    _cfg("P3", LLAMA_SMALL, 4096, 1, "bf16", attn="flash_attention_2"),
    _cfg("P4", LLAMA_SMALL, 4096, 1, "bf16", attn="flash_attention_2", packing=1024),
]


# The allocator's configuration: PYTORCH_CUDA_ALLOC_CONF, and PYTORCH_ALLOC_CONF, the name newer torch
# also reads. A comma-separated list of key:value options.
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def with_expandable_segments(conf):
    """conf with expandable_segments:True, any other setting of it replaced."""
    kept = [o for o in conf.split(",") if o.strip() and o.split(":")[0].strip() != "expandable_segments"]
    return ",".join(kept + ["expandable_segments:True"])


def expandable_segments_on(environ):
    """Whether the environment asks PyTorch's allocator for expandable segments."""
    for var in ALLOC_CONF_VARS:
        for option in environ.get(var, "").split(","):
            key, _, value = option.partition(":")
            if key.strip() == "expandable_segments" and value.strip().lower() == "true":
                return True
    return False


class EnvError(Exception):
    """A missing package or device: one line on stderr, exit status 2."""


# ----------------------------------------------------------------------------------------------------------
# command line

def build_parser():
    p = argparse.ArgumentParser(
        prog="collect_hf.py",
        description="Measure GPU memory phases and step time of PyTorch + Hugging Face transformers training "
                    "(random-init models, random tokens) in trainplan's measurement format (JSON lines).",
        epilog="Example: python3 scripts/collect_hf.py --preset shared-h100 -o my-gpu.jsonl",
    )
    m = p.add_argument_group("model (random initialisation from a config; omitted shape flags take the family's small default)")
    m.add_argument("--family", choices=FAMILIES, default="gpt2", help="GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Phi3ForCausalLM (default gpt2)")
    m.add_argument("--layers", type=int, help="decoder layers L")
    m.add_argument("--hidden", type=int, help="hidden size h")
    m.add_argument("--heads", type=int, help="attention heads a")
    m.add_argument("--kv-heads", type=int, help="key/value heads (llama/mistral/qwen2/phi3; gpt2: = heads)")
    m.add_argument("--ffn", type=int, help="MLP width (gpt2: n_inner, default 4h)")
    m.add_argument("--vocab", type=int, help="vocabulary size V")
    m.add_argument("--tied", action="store_true", help="tie input and output embeddings (gpt2: always tied)")
    m.add_argument("--max-positions", type=int, help="gpt2 n_positions (default max(1024, seq)); others max_position_embeddings (default max(2048, seq))")
    m.add_argument("--sliding-window", type=int, default=None, help="mistral/qwen2/phi3 sliding window (default: none)")
    r = p.add_argument_group("run")
    r.add_argument("--seq", type=int, default=1024, help="sequence length (default 1024)")
    r.add_argument("--micro-batch", type=int, default=4, help="micro-batch size (default 4)")
    r.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    r.add_argument("--regime", choices=REGIMES, default=None,
                   help="amp-bf16: fp32 model under torch.autocast(bfloat16); amp-fp16: fp32 model, autocast(float16) "
                        "and torch.amp.GradScaler; bf16: model.to(bfloat16); fp32: no autocast; bf16-mixed (--parallel "
                        "fsdp2): fp32 model, MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32) "
                        "(default amp-bf16; bf16-mixed with --parallel fsdp2)")
    r.add_argument("--attn", choices=("sdpa", "eager", "flash_attention_2"), default="sdpa",
                   help="attn_implementation (default sdpa; flash_attention_2 needs the flash-attn package)")
    r.add_argument("--packing", type=int, metavar="DOC_TOKENS", default=None,
                   help="pack documents of this many tokens into each row (position_ids restart at each; default: unpacked)")
    r.add_argument("--compile", action="store_true",
                   help="torch.compile the model (nn.Module.compile: Inductor, default mode) after any wrapping; plan "
                        "check predicts compiled lines with plan --compile where it models them")
    r.add_argument("--gc", action="store_true", help='gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})')
    r.add_argument("--dropout", type=float, default=None,
                   help="gpt2: resid/embd/attn_pdrop (default: GPT2Config's 0.1); others: attention_dropout (default 0.0)")
    r.add_argument("--opt", choices=("foreach", "fused"), default="foreach", help="AdamW implementation (default foreach)")
    r.add_argument("--lora", type=int, metavar="RANK", help="train LoRA adapters of this rank (peft) instead of all weights")
    r.add_argument("--lora-targets", default="q,k,v,o",
                   help="trainplan's form q,k,v,o[,mlp] (mapped to each family's modules) or module names "
                        "(comma separated, passed to peft as they are); default q,k,v,o")
    r.add_argument("--lora-alpha", type=int, default=None, help="LoRA alpha (default 2*rank)")
    r.add_argument("--lora-dropout", type=float, default=0.0, help="peft's lora_dropout (default 0.0, as peft's)")
    r.add_argument("--expandable-segments", action="store_true",
                   help="PyTorch's allocator with expandable_segments:True (added to PYTORCH_CUDA_ALLOC_CONF before torch "
                        "is imported; trainplan: --expandable-segments). Without it the environment's setting is recorded")
    r.add_argument("--steps", type=int, default=3, help="training steps; phases of the last, step_s = median of steps 2..N (default 3)")
    r.add_argument("--seed", type=int, default=0)
    o = p.add_argument_group("output")
    o.add_argument("--id", help="configuration id (default: made from the flags)")
    o.add_argument("--profile", action="store_true", help="one extra step under torch.profiler: kernels per step and GPU busy time (\"profile\")")
    o.add_argument("--memory-history", metavar="DIR",
                   help="record the caching allocator's every allocation and free, from model creation to the end of the measured steps, "
                        "into DIR/ID.pickle (torch.cuda.memory._dump_snapshot; view it at https://pytorch.org/memory_viz), each "
                        "event labelled with its step and phase; scripts/compare_allocator_history.py sets it beside plan check's replay")
    o.add_argument("--inventory", action="store_true", help="add the saved-tensor inventory (non-checkpointed runs; one extra forward after the measured steps)")
    o.add_argument("-o", "--output", metavar="FILE", help="append the line(s) to FILE (env line first if FILE is new or empty); default stdout")
    o.add_argument("--env-only", action="store_true", help="only write the env line")
    o.add_argument("--no-env", action="store_true", help="never write the env line (presets pass this to their child runs)")
    o.add_argument("--note", help="free text for the env line's note")
    d = p.add_argument_group("several GPUs (scripts/collect_parallel.py; docs/validation.md)")
    d.add_argument("--parallel", choices=collect_parallel.PARALLEL_MODES, default="none",
                   help="fsdp2: fully_shard per decoder layer and root; ddp: DistributedDataParallel(bucket_cap_mb=25); "
                        "zero1: DDP and ZeroRedundancyOptimizer; tp: DTensor tensor parallelism (parallelize_module, "
                        "column-wise q,k,v,gate,up, row-wise o,down). Under torchrun the real process group (NCCL); "
                        "otherwise PyTorch's fake process group on one GPU: the per-rank memory of --world-size ranks "
                        "(default none: one GPU)")
    d.add_argument("--world-size", type=int, help="with --parallel on one GPU: the fake process group's ranks (2 to 1024)")
    d.add_argument("--rank", type=int, help="with --parallel on one GPU: the rank measured (default 0)")
    s = p.add_argument_group("sweeps")
    s.add_argument("--preset", choices=sorted(PRESETS), help="run a built-in list of configurations, each in a fresh process: "
                   "shared-h100 (the reference file's 14), extra (Mistral/Qwen2, amp-fp16, grad accum 4, seq 8192, LoRA), all")
    s.add_argument("--only", metavar="IDS", help="with --preset: only these of its configurations, comma-separated ids "
                   "in the preset's order (e.g. S1,S5,S10: the shared runs the allocator gaps need)")
    s.add_argument("--dry-run", action="store_true", help="with --preset: print the commands instead of running them")
    return p


def resolve_shape(args):
    if args.regime is None:
        args.regime = "bf16-mixed" if args.parallel == "fsdp2" else "amp-bf16"
    d = FAMILY_DEFAULTS[args.family]
    for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
        if getattr(args, k) is None:
            setattr(args, k, d[k])
    if args.family == "gpt2":
        if args.kv_heads not in (None, args.heads):
            raise SystemExit("collect_hf: gpt2 has no grouped-query attention: --kv-heads must equal --heads")
        args.kv_heads = args.heads
        if args.ffn is None:
            args.ffn = 4 * args.hidden
        args.tied = True  # GPT2LMHeadModel always ties lm_head to wte
        if args.max_positions is None:
            args.max_positions = max(1024, args.seq)
    else:
        if args.kv_heads is None:
            args.kv_heads = args.heads
        if args.max_positions is None:
            args.max_positions = max(2048, args.seq)
    if args.max_positions < args.seq:
        raise SystemExit("collect_hf: --max-positions is smaller than --seq")
    if args.hidden % args.heads or args.heads % args.kv_heads:
        raise SystemExit("collect_hf: heads must divide hidden and kv-heads must divide heads")
    if args.dropout is None:
        args.dropout = 0.1 if args.family == "gpt2" else 0.0  # GPT2Config's default pdrop; Llama-like: 0.0
    if args.steps < 2:
        raise SystemExit("collect_hf: --steps must be at least 2 (step_s is the median of steps 2..N)")
    if args.grad_accum < 1 or args.micro_batch < 1 or args.seq < 1:
        raise SystemExit("collect_hf: --seq, --micro-batch and --grad-accum must be positive")
    if args.packing is not None and args.packing < 1:
        raise SystemExit("collect_hf: --packing must be at least 1 token")
    if args.packing is not None and args.attn == "eager":
        raise SystemExit("collect_hf: --packing needs --attn sdpa or flash_attention_2 (trainplan models no packed eager attention)")
    if args.id is None:
        args.id = "{}-L{}-h{}-s{}-b{}{}-{}-{}{}{}{}".format(
            args.family, args.layers, args.hidden, args.seq, args.micro_batch,
            "x%d" % args.grad_accum if args.grad_accum > 1 else "", args.regime, args.attn,
            "-gc" if args.gc else "", "-fused" if args.opt == "fused" else "",
            "-lora%d" % args.lora if args.lora else "")
        if args.packing is not None:
            args.id += "-pack%d" % args.packing
        if args.compile:
            args.id += "-compile"
        if args.parallel != "none":
            world = args.world_size or os.environ.get("WORLD_SIZE", "")
            args.id += "-{}-w{}{}".format(args.parallel, world, "-r%d" % args.rank if args.rank else "")


def batch_shape(args):
    """A micro-batch's input_ids: [mbs, seq]; packed under flash_attention_2, TRL's padding-free collator's one
    row [1, mbs * seq] (transformers' _is_packed_sequence needs batch size 1)."""
    if args.packing is not None and args.attn == "flash_attention_2":
        return (1, args.micro_batch * args.seq)
    return (args.micro_batch, args.seq)


def packed_position_ids(args):
    """position_ids of packed documents of --packing tokens in rows of --seq, the last one of each row the
    remainder: each row 0, 1, ..., d - 1, 0, 1, ... (as TRL's packing), in batch_shape's layout."""
    row = [i % args.packing for i in range(args.seq)]
    if batch_shape(args)[0] == 1:
        return [row * args.micro_batch]
    return [row for _ in range(args.micro_batch)]


def model_field(args):
    """The "model" object as in the reference file (gpt2: fam, L, h, a, V; others all eight fields)."""
    if args.family == "gpt2":
        m = dict(fam="gpt2", L=args.layers, h=args.hidden, a=args.heads, V=args.vocab)
        if args.ffn != 4 * args.hidden:
            m["ffn"] = args.ffn
        if args.max_positions != 1024:
            m["max_positions"] = args.max_positions  # trainplan reads it for gpt2 (default 1024)
        return m
    m = dict(fam=args.family, L=args.layers, h=args.hidden, a=args.heads, kv=args.kv_heads, ffn=args.ffn,
             V=args.vocab, tied=bool(args.tied))
    if args.family in ("mistral", "qwen2", "phi3"):
        m["sliding_window"] = args.sliding_window  # null: none (trainplan takes MistralConfig's 4096 when absent)
    return m


# LoRA targets: trainplan's q,k,v,o,mlp (planner/run/run_config.hpp) mapped to each family's module names.
LLAMA_LORA = {"q": ["q_proj"], "k": ["k_proj"], "v": ["v_proj"], "o": ["o_proj"], "mlp": ["gate_proj", "up_proj", "down_proj"]}
PHI3_LORA = {"q": ["qkv_proj"], "k": ["qkv_proj"], "v": ["qkv_proj"], "o": ["o_proj"], "mlp": ["gate_up_proj", "down_proj"]}
GPT2_LORA = {"q": ["attn.c_attn"], "k": ["attn.c_attn"], "v": ["attn.c_attn"], "o": ["attn.c_proj"], "mlp": ["mlp.c_fc", "mlp.c_proj"]}


def lora_modules(args):
    """(peft target_modules, module list for the output, trainplan targets text or None)."""
    parts = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    if parts and all(t in LLAMA_LORA for t in parts):
        table = {"gpt2": GPT2_LORA, "phi3": PHI3_LORA}.get(args.family, LLAMA_LORA)
        mods = []
        for t in parts:
            for name in table[t]:
                if name not in mods:
                    mods.append(name)
        if args.family in ("gpt2", "phi3"):
            if any(t in parts for t in "qkv") and not all(t in parts for t in "qkv"):
                print("collect_hf: note: {} holds q, k and v in one projection: all three get adapters".format(
                    "gpt2's c_attn" if args.family == "gpt2" else "phi3's qkv_proj"), file=sys.stderr)
        if args.family == "gpt2":
            # c_proj exists in both attn and mlp: a full-name regex selects exactly the wanted ones.
            target = r".*\.(" + "|".join(n.replace(".", r"\.") for n in mods) + r")$"
        else:
            target = mods
        return target, mods, ",".join(parts)
    return parts, parts, None


# ----------------------------------------------------------------------------------------------------------
# output

def file_is_empty(path):
    return path is None or not os.path.exists(path) or os.path.getsize(path) == 0


def emit(path, obj):
    line = json.dumps(obj) + "\n"
    if path is None:
        sys.stdout.write(line)
        sys.stdout.flush()
    else:
        with open(path, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def import_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise EnvError("collect_hf: torch is not installed")
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise EnvError("collect_hf: transformers is not installed")
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise EnvError("collect_hf: no CUDA device")
    return torch, transformers


def versions(torch, transformers):
    return dict(torch=torch.__version__, transformers=transformers.__version__,
                gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda)


def env_line(torch, transformers, note=None):
    """Must run right after CUDA initialisation, before anything is allocated on the device."""
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    # README: gpu_total_bytes = mem_get_info()'s total; context_bytes = what the device had in use after CUDA
    # initialisation, less PyTorch's reserved bytes (device-wide: other processes on the GPU count too).
    context = (total - free) - torch.cuda.memory_reserved()
    v = versions(torch, transformers)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if note is None:
        note = "{}, CUDA {} (torch build), cuDNN {}; torch.cuda.mem_get_info total; context = device bytes in use " \
               "after CUDA init minus torch reserved; measured by scripts/collect_hf.py".format(v["gpu"], v["cuda"], cudnn)
    return {"id": "env", "torch": v["torch"], "transformers": v["transformers"], "gpu": v["gpu"],
            "gpu_total_bytes": int(total), "context_bytes": int(context), "cuda": v["cuda"], "cudnn": cudnn,
            "host_cpu": host_cpu(), "host_cpus": os.cpu_count() or 0, "note": note}


def host_cpu():
    """The CPU's model name (/proc/cpuinfo, else platform): the step's host time, around the kernels, depends on it."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine() or "unknown"


# ----------------------------------------------------------------------------------------------------------
# model

def make_config(args, transformers):
    common = dict(vocab_size=args.vocab, use_cache=False)  # training: no KV cache (the reference rows hold none)
    if args.family == "gpt2":
        cfg = transformers.GPT2Config(
            n_layer=args.layers, n_embd=args.hidden, n_head=args.heads, n_inner=args.ffn, n_positions=args.max_positions,
            resid_pdrop=args.dropout, embd_pdrop=args.dropout, attn_pdrop=args.dropout, **common)
    else:
        cls = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig, "qwen2": transformers.Qwen2Config,
               "phi3": getattr(transformers, "Phi3Config", None)}[args.family]
        if cls is None:
            raise SystemExit("collect_hf: this transformers has no Phi3Config")
        kw = dict(hidden_size=args.hidden, intermediate_size=args.ffn, num_hidden_layers=args.layers,
                  num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                  max_position_embeddings=args.max_positions, tie_word_embeddings=bool(args.tied),
                  attention_dropout=args.dropout, **common)
        if args.family == "mistral":
            kw["sliding_window"] = args.sliding_window
        elif args.family == "qwen2":
            kw["use_sliding_window"] = args.sliding_window is not None
            kw["sliding_window"] = args.sliding_window
        elif args.family == "phi3":
            kw["sliding_window"] = args.sliding_window  # None: every layer attends to the whole sequence
        cfg = cls(**kw)
    try:
        cfg._attn_implementation = args.attn
    except Exception:
        pass
    return cfg


def build_model(args, torch, transformers):
    cfg = make_config(args, transformers)
    try:
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=args.attn)
    except TypeError:
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.to(torch.float32)
    model.config.use_cache = False
    effective = getattr(model.config, "_attn_implementation", args.attn)
    if effective != args.attn:
        raise RuntimeError("asked for attn_implementation={} but the model uses {}".format(args.attn, effective))
    return model


def count_params(model):
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once


# ----------------------------------------------------------------------------------------------------------
# autograd graph walk (inventory and SDPA backend)

def segment_sizes(torch):
    """[[pool, bytes], ...]: every segment the caching allocator holds after the measured steps, largest
    first. None is released during a run (no empty_cache, no OOM retry), so these are the segments whose sum
    was the reserved peak: what a replay of the allocator has to reproduce, segment by segment."""
    segments = [["small" if seg.get("segment_type") == "small" else "large", int(seg["total_size"])]
                for seg in torch.cuda.memory_snapshot()]
    return sorted(segments, key=lambda seg: (-seg[1], seg[0]))


def allocator_counts(torch):
    """The caching allocator's counters over the process so far (torch.cuda.memory_stats(), the keys this torch
    has): cudaMalloc calls (each a new segment), cudaFree calls, the times a failed cudaMalloc made it free its
    cache and retry, and out-of-memory errors. With no free and no retry, the segments listed after the run are
    every segment it made."""
    stats = torch.cuda.memory_stats()
    keys = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms")
    return {k: int(stats[k]) for k in keys if k in stats}


def start_memory_history(torch):
    """Records every allocator event from here (no stack traces: addresses, sizes and order are what a replay
    of the allocator is checked against). False when this torch cannot."""
    record = getattr(torch.cuda.memory, "_record_memory_history", None)
    if record is None:
        print("collect_hf: note: this torch cannot record the allocator's history; --memory-history ignored", file=sys.stderr)
        return False
    record(enabled="all", context=None, stacks="python", max_entries=1000000)
    return True


def memory_marker(torch, recording):
    """A function that labels the allocator's next recorded events ("step 2 backward": each entry's
    user_metadata in the dumped history, which compare_allocator_history.py reads), or one that does nothing
    when not recording or when this torch has no torch.cuda.memory._set_memory_metadata."""
    set_metadata = getattr(torch.cuda.memory, "_set_memory_metadata", None) if recording else None
    return set_metadata if set_metadata is not None else (lambda text: None)


def dump_memory_history(torch, directory, run_id):
    """Writes DIR/ID.pickle and stops recording."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id) + ".pickle")
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    return path


def walk_graph(torch, loss, param_keys, read_saved):
    """Breadth first from loss.grad_fn. Returns (set of node names, inventory rows or None)."""
    from collections import deque
    names = set()
    groups = {}  # insertion order = first met
    seen_storages = set()
    seen_nodes = set()
    keep = []  # keep node objects alive so that id() is not reused during the walk
    queue = deque([loss.grad_fn] if loss.grad_fn is not None else [])
    while queue:
        fn = queue.popleft()
        if id(fn) in seen_nodes:
            continue
        seen_nodes.add(id(fn))
        keep.append(fn)
        name = fn.name()
        names.add(name)
        if read_saved:
            for attr in sorted(dir(fn)):  # dir() order, as sorted: _saved_key comes before _saved_query
                if not attr.startswith("_saved_"):
                    continue
                try:
                    value = getattr(fn, attr)
                except Exception:  # freed or not readable
                    continue
                tensors = [value] if isinstance(value, torch.Tensor) else \
                    [t for t in value if isinstance(t, torch.Tensor)] if isinstance(value, (list, tuple)) else []
                for t in tensors:
                    st = t.untyped_storage()
                    skey = (str(t.device), st.data_ptr())
                    is_param = skey in param_keys
                    gkey = (name, attr, str(t.dtype).replace("torch.", ""), tuple(t.shape), is_param)
                    g = groups.setdefault(gkey, [0, 0])
                    g[0] += 1
                    if skey not in seen_storages:
                        seen_storages.add(skey)
                        g[1] += st.nbytes()
        for nxt, _ in fn.next_functions:
            if nxt is not None and id(nxt) not in seen_nodes:
                queue.append(nxt)
    rows = None
    if read_saved:
        rows = [dict(op=k[0], saved=k[1], dtype=k[2], shape=list(k[3]), param=k[4], count=v[0], unique_bytes=v[1])
                for k, v in groups.items()]
        rows.sort(key=lambda r: -r["unique_bytes"])  # stable: ties keep first-met order
    return names, rows


def sdpa_backend(names):
    joined = " ".join(sorted(names))
    if "ScaledDotProductCudnnAttentionBackward" in joined:
        return "cudnn"
    if "FlashAttention" in joined:
        return "flash"
    if "EfficientAttention" in joined:
        return "efficient"
    return "math"  # the math path decomposes into bmm/softmax nodes


# ----------------------------------------------------------------------------------------------------------
# one configuration

def is_oom(torch, e):
    if isinstance(e, torch.cuda.OutOfMemoryError):
        return True
    msg = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in msg or "CUBLAS_STATUS_ALLOC_FAILED" in msg)


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def profile_step(torch, step, nccl_layout=None):
    """Runs `step` once more under torch.profiler (CUDA activity only) and sums what the GPU ran: kernels
    (count, summed time, and busy time as the union of their intervals) and copies/memsets apart. Whether a
    run is bound by the host or by the GPU shows as step_s against busy_s; the count checks the planner's
    kernels per step. A failure is recorded in the line, never fatal: the measurement stands without it.
    With `nccl_layout` (a run under torchrun) CPU activity is recorded too, so that each NCCL kernel carries its
    collective's sizes, and "collectives" lists them (collect_parallel.nccl_collectives)."""
    try:
        from torch.profiler import profile, ProfilerActivity
        cuda = torch.autograd.DeviceType.CUDA
        activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if nccl_layout is not None else [])
        with profile(activities=activities) as prof:
            wall, _ = step()
        kernels, copies, by_name = [], [], {}
        for e in prof.events():
            if e.device_type != cuda:
                continue
            span = (e.time_range.start, e.time_range.end)  # microseconds
            if e.name.startswith(("Memcpy", "Memset")):
                copies.append(span)
                continue
            kernels.append(span)
            entry = by_name.setdefault(e.name[:160], [0, 0.0])  # templated names run to thousands of characters
            entry[0] += 1
            entry[1] += (span[1] - span[0]) / 1e6
        busy, end = 0.0, None
        for a, b in sorted(kernels):
            if end is None or a > end:
                busy += b - a
                end = b
            elif b > end:
                busy += b - end
                end = b
        table = sorted(([name, n, t] for name, (n, t) in by_name.items()), key=lambda row: -row[2])
        out = {"wall_s": wall, "kernels": len(kernels), "kernel_s": sum(b - a for a, b in kernels) / 1e6,
               "busy_s": busy / 1e6, "copies": len(copies), "copy_s": sum(b - a for a, b in copies) / 1e6,
               "kernels_by_name": table}
        if nccl_layout is not None:
            out["collectives"] = collect_parallel.nccl_collectives(collect_parallel.trace_events(prof), nccl_layout)
        return out
    except Exception as e:  # pylint: disable=broad-except
        return {"error": "{}: {}".format(type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")}


def run_one(args, torch, transformers, layout=None):
    """One configuration; `layout` (collect_parallel.Layout) for a --parallel run, None on one GPU."""
    if args.lora:
        try:
            import peft
        except ImportError:
            raise EnvError("collect_hf: peft is not installed (needed for --lora)")
    dev = torch.device("cuda", collect_parallel.device_index(layout))
    torch.cuda.set_device(dev)
    writes = layout is None or layout.writes_report  # under torchrun rank 0 writes the report
    if writes and not args.no_env and file_is_empty(args.output):
        emit(args.output, env_line(torch, transformers, args.note))  # context measured before anything else
    if layout is not None:
        collect_parallel.init_process_group(torch, layout)
    try:
        return run_configuration(args, torch, transformers, layout, dev, writes)
    finally:
        if layout is not None:
            collect_parallel.destroy_process_group(torch)


def run_configuration(args, torch, transformers, layout, dev, writes):
    peft = None
    if args.lora:
        import peft  # checked by run_one

    rec = dict(id=args.id, model=model_field(args), seq=args.seq, mbs=args.micro_batch, grad_accum=args.grad_accum,
               regime=args.regime, attn=args.attn, loss_impl="standard", packing=args.packing, compile=bool(args.compile), gc=bool(args.gc), drop=args.dropout, opt=args.opt,
               expandable_segments=expandable_segments_on(os.environ))
    if args.lora:
        target, mods, planner_targets = lora_modules(args)
        rec["lora"] = args.lora
        if planner_targets is not None:
            rec["lora_targets"] = planner_targets
        rec["lora_modules"] = mods
        rec["lora_dropout"] = args.lora_dropout
    ver = versions(torch, transformers)

    state = dict(step=0, phase="build", reserved_peak=0)
    phases = {}
    model = optimizer = scaler = out = loss = None
    inputs = []
    recording = bool(args.memory_history) and start_memory_history(torch)
    mark = memory_marker(torch, recording)
    mark("creation")
    try:
        torch.manual_seed(args.seed)
        model = build_model(args, torch, transformers)  # on the CPU, fp32
        rec["params"] = count_params(model)
        if args.gc:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if args.regime == "bf16":  # (bf16-mixed keeps fp32 parameters: fully_shard's policy casts them)
            # README: bf16 = model.to(bfloat16), optimizer state in bf16 as well. A LoRA base is cast before
            # get_peft_model, as a base loaded in bf16 is: peft then keeps the adapters (and so their
            # gradients and AdamW state) in fp32 (autocast_adapter_dtype=True), which trainplan assumes.
            model.to(torch.bfloat16)
        if args.lora:
            if args.gc:
                model.enable_input_require_grads()
            lcfg = peft.LoraConfig(r=args.lora, lora_alpha=args.lora_alpha or 2 * args.lora, lora_dropout=args.lora_dropout,
                                   target_modules=target, bias="none", task_type="CAUSAL_LM",
                                   fan_in_fan_out=args.family == "gpt2")  # GPT-2's Conv1D stores [in, out]
            model = peft.get_peft_model(model, lcfg)
            rec["lora_dtype"] = str(next(p for p in model.parameters() if p.requires_grad).dtype).replace("torch.", "")
        model.to(dev)
        model.train()
        if layout is not None:  # the mode's wrapping, on the GPU (collect_parallel.wrap_model)
            model, wrapping = collect_parallel.wrap_model(args, torch, model, layout, dev)
            rec.update(collect_parallel.report_fields(layout, wrapping))
        if args.compile:  # in place, so that model.config and the parameters stay where they were
            model.compile()
        trainable = [p for p in model.parameters() if p.requires_grad]
        rec["trainable_params"] = sum(p.numel() for p in trainable)  # (DTensor and fully_shard: the global count)
        rec["buffer_bytes"] = sum(b.numel() * b.element_size() for b in model.buffers())
        param_keys = set() if layout is not None else {(str(p.device), p.untyped_storage().data_ptr()) for p in model.parameters()}
        # README: torch.optim.AdamW(lr=1e-4) with foreach=True (PyTorch's default on CUDA) or fused=True
        # (zero1: inside ZeroRedundancyOptimizer, over this rank's share of the parameters)
        opt_kw = {"foreach": True} if args.opt == "foreach" else {"fused": True}
        optimizer = collect_parallel.make_optimizer(torch, layout, trainable, opt_kw)
        amp_dtype = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(args.regime)
        if args.regime == "amp-fp16":
            scaler = torch.amp.GradScaler("cuda")

        def autocast():
            return torch.autocast("cuda", dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext()

        # README: inputs are random token ids, labels = input_ids (one tensor per micro-batch, made once)
        inputs = [torch.randint(0, args.vocab, batch_shape(args), device=dev) for _ in range(args.grad_accum)]
        # --packing: the documents' position_ids (one tensor, the same for every micro-batch)
        extra = {}
        if args.packing is not None:
            extra["position_ids"] = torch.tensor(packed_position_ids(args), dtype=torch.long, device=dev)

        pygc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()  # reserved_peak covers the training run from here
        times = []
        skipped = []  # steps GradScaler skipped (amp-fp16)
        mem = torch.cuda

        def reset_peaks():
            # reset_peak_memory_stats() resets the reserved peak too: keep its running maximum over the run.
            state["reserved_peak"] = max(state["reserved_peak"], mem.max_memory_reserved())
            mem.reset_peak_memory_stats()

        def train_step(step, host):
            """One optimizer step: fills `phases`, adds each phase's host seconds (the Python calls' own time,
            kernels still running) to `host`, returns (wall seconds, the last micro-batch's loss)."""
            state["step"] = step
            phases.clear()
            torch.cuda.synchronize()
            scale_before = scaler.get_scale() if scaler is not None else None  # synchronized: no extra wait
            t0 = time.perf_counter()
            phases["before_step"] = mem.memory_allocated()
            out = loss = None
            for k, x in enumerate(inputs):
                last = k == len(inputs) - 1
                state["phase"] = "forward"
                mark("step {} forward".format(step))
                reset_peaks()
                h = time.perf_counter()
                with autocast():
                    out = model(input_ids=x, labels=x, **extra)
                host["forward"] += time.perf_counter() - h
                phases["forward_peak"] = max(phases.get("forward_peak", 0), mem.max_memory_allocated())
                phases["after_forward"] = mem.memory_allocated()
                state["phase"] = "backward"
                mark("step {} backward".format(step))
                reset_peaks()
                h = time.perf_counter()
                loss = out.loss / args.grad_accum if args.grad_accum > 1 else out.loss
                (scaler.scale(loss) if scaler is not None else loss).backward()
                host["backward"] += time.perf_counter() - h
                loss = loss.detach()
                phases["backward_peak"] = max(phases.get("backward_peak", 0), mem.max_memory_allocated())
                phases["after_backward"] = mem.memory_allocated()  # read while `out` (logits) is still referenced
                if not last:
                    out = None  # an earlier micro-batch's output goes before the next forward
            state["phase"] = "optimizer"
            mark("step {} optimizer".format(step))
            reset_peaks()  # reset before the logits are freed (reference S3: optimizer_peak == after_backward)
            out = None  # `del out`: only the loss value is kept
            h = time.perf_counter()
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            phases["optimizer_peak"] = mem.max_memory_allocated()
            optimizer.zero_grad(set_to_none=True)
            host["optimizer"] += time.perf_counter() - h
            torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
            if scaler is not None and scaler.get_scale() < scale_before:  # update() backed off: step skipped
                skipped.append(step)
            return seconds, float(loss) * args.grad_accum

        host_runs = []
        for step in range(1, args.steps + 1):
            host = dict(forward=0.0, backward=0.0, optimizer=0.0)
            seconds, loss_value = train_step(step, host)
            times.append(seconds)
            host_runs.append(host)
        rec["phases"] = dict(phases)  # a copy: a profiled step (below) refills `phases`
        rec["alloc_peak"] = max(phases["forward_peak"], phases["backward_peak"], phases["optimizer_peak"])
        rec["reserved_peak"] = max(state["reserved_peak"], mem.max_memory_reserved())
        rec["segments"] = segment_sizes(torch)
        rec["allocator_counts"] = allocator_counts(torch)
        if recording:
            mark("")
            rec["memory_history"] = dump_memory_history(torch, args.memory_history, args.id)
            recording = False
        rec["step_s"] = median(times[1:])  # README: median of steps 2 and 3
        rec["host_s"] = {k: median([h[k] for h in host_runs[1:]]) for k in ("forward", "backward", "optimizer")}
        if args.profile:
            rec["profile"] = profile_step(torch, lambda: train_step(args.steps + 1, dict(forward=0.0, backward=0.0, optimizer=0.0)),
                                          layout if layout is not None and layout.process_group == "nccl" else None)
            if "collectives" in rec["profile"]:  # the NCCL kernels, a row per collective (collect_parallel.nccl_collectives)
                rec["collectives"] = rec["profile"].pop("collectives")
        rec["loss"] = loss_value
        if scaler is not None:
            rec["grad_scale"] = float(scaler.get_scale())
            rec["skipped_steps"] = [s for s in skipped if s <= args.steps]  # not the profiled extra step

        # Extra forward after the measured steps: inventory and SDPA backend, phase figures untouched.
        state["step"], state["phase"] = args.steps + 1, "inventory"
        want_saved = args.inventory and not args.gc and layout is None and not args.compile
        if args.inventory and args.gc:
            print("collect_hf: note: no inventory for a checkpointed run (reading saved tensors would recompute)", file=sys.stderr)
        if args.inventory and args.compile:
            print("collect_hf: note: no inventory for a compiled run (its graph's nodes are Inductor's, not the ops')", file=sys.stderr)
        if not args.compile and (want_saved or (args.attn == "sdpa" and layout is None)):  # (every rank would have to run it)
            try:
                with autocast():
                    out = model(input_ids=inputs[-1], labels=inputs[-1], **extra)
                names, rows = walk_graph(torch, out.loss, param_keys, want_saved)
                out = None
                if args.attn == "sdpa":
                    rec["sdpa_backend"] = sdpa_backend(names)
                if want_saved:
                    rec["inventory"] = rows
            except Exception as e:  # the measurement stands even if this pass fails
                out = None
                if not is_oom(torch, e):
                    raise
                print("collect_hf: note: out of memory in the inventory pass; line written without it", file=sys.stderr)
                if args.attn == "sdpa":
                    rec["sdpa_backend"] = "unknown"
        rec.update(ver)
        if writes:
            emit(args.output, rec)
        return 0
    except Exception as e:
        if not is_oom(torch, e):
            raise
        # OOM: write what was measured, exit 0 so that a sweep goes on.
        peak_so_far = torch.cuda.max_memory_allocated()
        out = loss = None
        rec["oom"] = True
        rec["oom_step"] = state["step"]
        rec["oom_phase"] = state["phase"]
        rec["oom_phase_peak_so_far"] = peak_so_far
        rec["oom_message"] = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        rec["phases"] = phases
        rec["reserved_peak"] = max(state["reserved_peak"], torch.cuda.max_memory_reserved())
        rec["allocator_counts"] = allocator_counts(torch)
        if "params" not in rec:
            try:
                rec["params"] = count_params(build_model(args, torch, transformers))
            except Exception:
                rec["params"] = 0
        rec.update(ver)
        if writes:
            emit(args.output, rec)
        print("collect_hf: {}: out of memory at step {} ({}); line written with \"oom\": true".format(
            args.id, state["step"], state["phase"]), file=sys.stderr)
        return 0
    finally:
        if recording:  # an OOM or an error before the dump: what was recorded up to it
            try:
                dump_memory_history(torch, args.memory_history, args.id)
            except Exception:
                pass
        # Thorough cleanup, for callers that run several configurations in one process.
        out = loss = None
        del model, optimizer, scaler, inputs
        pygc.collect()
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        except Exception:
            pass


# ----------------------------------------------------------------------------------------------------------
# presets

def preset_argv(entry, args):
    m = entry["model"]
    argv = ["--family", m["fam"], "--layers", str(m["L"]), "--hidden", str(m["h"]), "--heads", str(m["a"]),
            "--vocab", str(m["V"])]
    if "kv" in m:
        argv += ["--kv-heads", str(m["kv"])]
    if "ffn" in m:
        argv += ["--ffn", str(m["ffn"])]
    if m.get("tied") and m["fam"] != "gpt2":
        argv += ["--tied"]
    if "max_positions" in m:
        argv += ["--max-positions", str(m["max_positions"])]
    if m.get("sliding_window"):
        argv += ["--sliding-window", str(m["sliding_window"])]
    argv += ["--seq", str(entry["seq"]), "--micro-batch", str(entry["mbs"]),
             "--grad-accum", str(entry.get("grad_accum", 1)), "--regime", entry["regime"], "--attn", entry["attn"],
             "--dropout", repr(float(entry["drop"])), "--opt", entry["opt"], "--steps", str(args.steps),
             "--seed", str(args.seed), "--id", entry["id"], "--no-env"]
    if entry["gc"]:
        argv += ["--gc"]
    elif not entry.get("compile"):
        argv += ["--inventory"]
    if entry.get("compile"):
        argv += ["--compile"]
    if entry.get("expandable") or args.expandable_segments:
        argv += ["--expandable-segments"]
    if entry.get("packing"):
        argv += ["--packing", str(entry["packing"])]
    if entry.get("lora"):
        argv += ["--lora", str(entry["lora"]), "--lora-targets", entry.get("lora_targets", "q,k,v,o"),
                 "--lora-dropout", repr(float(entry.get("lora_dropout", 0.0)))]
    if args.profile:
        argv += ["--profile"]
    if args.memory_history:
        argv += ["--memory-history", args.memory_history]
    if args.output:
        argv += ["-o", args.output]
    return argv


def preset_entries(preset, only):
    """The preset's configurations, or those of them `only` names (comma-separated ids); an unknown id is an error."""
    entries = PRESETS[preset]
    if only is None:
        return entries
    wanted = [i.strip() for i in only.split(",")]
    known = [e["id"] for e in entries]
    unknown = [i for i in wanted if i not in known]
    if not wanted or unknown:
        raise SystemExit("collect_hf: --only {!r}: not in preset {} (its ids: {})".format(
            ",".join(unknown) if unknown else only, preset, ",".join(known)))
    return [e for e in entries if e["id"] in wanted]


def run_preset(args):
    me = [sys.executable, os.path.abspath(__file__)]
    entries = preset_entries(args.preset, args.only)
    cmds = []
    if not args.no_env and file_is_empty(args.output):
        env_cmd = me + ["--env-only"] + (["-o", args.output] if args.output else []) + (["--note", args.note] if args.note else [])
        cmds.append(("env", env_cmd))
    for e in entries:
        cmds.append((e["id"], me + preset_argv(e, args)))
    if args.dry_run:
        for _, c in cmds:
            print(" ".join(_quote(a) for a in c))
        return 0
    failed = []
    for name, c in cmds:
        print("collect_hf: [{}] {}".format(name, " ".join(_quote(a) for a in c[2:])), file=sys.stderr, flush=True)
        rc = subprocess.call(c)
        if rc == 2 and name == "env":  # no torch/transformers or no device: every run would fail the same way
            return 2
        if rc != 0:
            failed.append("{} (exit {})".format(name, rc))
    if failed:
        print("collect_hf: failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


def _quote(a):
    import shlex
    return shlex.quote(a)


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if args.only is not None and not args.preset:
            raise SystemExit("collect_hf: --only needs --preset")
        if args.preset and (args.parallel != "none" or args.world_size is not None or args.rank is not None):
            raise SystemExit("collect_hf: --parallel runs one configuration, not a --preset")
        if args.preset:
            return run_preset(args)
        layout = None
        if not args.env_only:
            resolve_shape(args)  # flag errors before torch is even imported
            layout = collect_parallel.resolve_layout(args, os.environ)
        if args.expandable_segments:  # read when CUDA's allocator starts: set before torch is imported
            for var in ALLOC_CONF_VARS:
                if var == ALLOC_CONF_VARS[0] or var in os.environ:
                    os.environ[var] = with_expandable_segments(os.environ.get(var, ""))
        torch, transformers = import_torch()  # lazily: --help and --dry-run work without torch
        if args.env_only:
            line = env_line(torch, transformers, args.note)
            if args.output and not file_is_empty(args.output):
                print("collect_hf: {} is not empty: env line printed, not appended".format(args.output), file=sys.stderr)
                emit(None, line)
            else:
                emit(args.output, line)
            return 0
        return run_one(args, torch, transformers, layout)
    except EnvError as e:
        print(str(e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
