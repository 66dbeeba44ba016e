#pragma once
// The operations of one training step on one GPU, each with the FLOPs it computes, the bytes it reads and
// writes and the kernels it launches, as the training stack's profile runs them. planner/time/roofline.hpp
// turns them into time. PyTorch eager launches Hugging Face's gelu_new as eight elementwise kernels and
// runs norms, rotary embeddings and the loss in fp32 under autocast; llm.c and this project's harness fuse
// what their kernels fuse.
#include <cstdint>
#include <string_view>
#include <vector>

#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// The classes of the report's time breakdown. Kernel launches and per-step host work are "overhead".
enum class op_class { gemm, attention, elementwise, loss, embedding, optimizer, overhead };
inline constexpr std::size_t op_class_count = 7;
std::string_view op_class_name(op_class c);  // "gemm", "attention", "elementwise", ...

struct step_op {
  std::string_view name;       // "mlp.gelu_new", "lm_head", "adamw.foreach"...: static strings
  op_class cls = op_class::elementwise;
  bool gemm_shaped = false;    // runs as a (batched) GEMM: its efficiency is e(m, n, k)
  // A fused attention kernel handed a mask instead of is_causal computes every tile of the square its FLOPs
  // count; a causal kernel skips those above the diagonal (planner/time/roofline.hpp).
  bool every_tile = false;
  // Runs between the last backward and the optimizer step, once a step: torch.amp.GradScaler's inf check
  // and unscaling (planner/time/roofline.cpp: before the host waits for the device, when it does).
  bool grad_scaler = false;
  // The part of its device work done in the step's forward passes (by its FLOPs, or its bytes when it has
  // none); the rest runs in backward, recomputation included. planner/time/roofline.hpp overlaps phases. A float
  // fills the padding after the fields above: sweeps copy millions of these.
  float forward_share = 1;
  double flops = 0;            // per step: every micro-batch, layer, forward, backward and recomputation
  double bytes = 0;            // read + written per step
  double kernels = 0;          // launches per step
  double m = 0, n = 0, k = 0;  // GEMM: the shape of one launch
};

// Kernel launches per step by the phase and the code that issues them. In PyTorch eager the forward (and a
// checkpointed layer's recomputation, which reruns Python's forward inside backward) is dispatched op by
// op from Python, backward by the autograd engine in C++: their host costs differ (planner/time/roofline.hpp).
struct step_launches {
  double forward = 0;    // the first forward of each micro-batch
  double recompute = 0;  // forward rerun in backward (activation checkpointing)
  double backward = 0;
  double optimizer = 0;
  double scaler = 0;     // torch.amp.GradScaler's per-step kernels before optimizer.step() (host: as the optimizer's)
  double total() const { return forward + recompute + backward + optimizer + scaler; }
};

struct step_ops {
  std::vector<step_op> ops;
  step_launches launches;  // the ops' kernels, by phase
  // Parameter tensors PyTorch's foreach AdamW walks in Python each step (bias corrections and step sizes
  // are per-tensor Python lists); 0 for fused optimizers.
  double foreach_tensors = 0;
  bool fp32_gemms = false;  // the GEMMs run in fp32 (no tensor cores): planner/time/roofline.hpp's fp32 efficiency
  // Forward and backward passes per step (gradient accumulation): they alternate, F1 B1 F2 B2 ..., which
  // planner/time/roofline.cpp's schedules follow.
  double micro_batches = 1;
  // Forward passes of the attention core per backward: 2 where recomputation reruns it (planner/time/communication.hpp
  // splits its time into forward and backward passes with it).
  double attention_forwards_per_backward = 1;
  // The host waits for the device before optimizer.step(): torch.amp.GradScaler.step reads found_inf with
  // .item() (torch/amp/grad_scaler.py, _maybe_opt_step) unless the optimizer unscales inside its own kernel
  // (_step_supports_amp_scaling: fused AdamW), so the optimizer's Python work no longer overlaps the backward.
  bool host_waits_before_optimizer = false;
  // Per-parameter gradients (PyTorch): where list_micro_batch_ops put one micro-batch's AccumulateGrad in-place adds (done by every
  // micro-batch but the first) and, right after, the training loop's loss / N with its backward (every
  // micro-batch of a step of several): repeat_micro_batches scales them by those counts. -1: none.
  std::int32_t accumulation_ops = -1;
};

// Multiplies one micro-batch's ops (a training stack's list) out to `grad_accum` micro-batches: every op but
// the optimizer's and the GradScaler's, the forward, recomputation and backward launches, and the
// accumulation ops (step_ops::accumulation_ops) by the micro-batches that run them.
void repeat_micro_batches(step_ops& ops, std::uint64_t grad_accum);

}  // namespace trainplan
