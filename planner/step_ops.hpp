#pragma once
// The operations of one training step on one GPU, each with the FLOPs it computes, the bytes it reads and
// writes and the kernels it launches, as the framework profile runs them (issue 10). planner/roofline.hpp
// turns them into time. PyTorch eager (hf) launches Hugging Face's gelu_new as eight elementwise kernels and
// runs norms, rotary embeddings and the loss in fp32 under autocast; llm.c and this project's harness fuse
// what their kernels fuse.
#include <cstdint>
#include <string_view>
#include <vector>

#include "planner/model_spec.hpp"
#include "planner/precision.hpp"
#include "planner/run_config.hpp"

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
  // count; a causal kernel skips those above the diagonal (planner/roofline.hpp).
  bool every_tile = false;
  // The part of its device work done in the step's forward passes (by its FLOPs, or its bytes when it has
  // none); the rest runs in backward, recomputation included. planner/roofline.hpp overlaps phases. A float
  // fills the padding after the two fields above: sweeps copy millions of these.
  float forward_share = 1;
  double flops = 0;            // per step: every micro-batch, layer, forward, backward and recomputation
  double bytes = 0;            // read + written per step
  double kernels = 0;          // launches per step
  double m = 0, n = 0, k = 0;  // GEMM: the shape of one launch
};

// Kernel launches per step by the phase and the code that issues them. In PyTorch eager the forward (and a
// checkpointed layer's recomputation, which reruns Python's forward inside backward) is dispatched op by
// op from Python, backward by the autograd engine in C++: their host costs differ (planner/roofline.hpp).
struct step_launches {
  double forward = 0;    // the first forward of each micro-batch
  double recompute = 0;  // forward rerun in backward (activation checkpointing)
  double backward = 0;
  double optimizer = 0;
  double total() const { return forward + recompute + backward + optimizer; }
};

struct step_ops {
  std::vector<step_op> ops;
  step_launches launches;  // the ops' kernels, by phase
  // Parameter tensors PyTorch's foreach AdamW walks in Python each step (bias corrections and step sizes
  // are per-tensor Python lists); 0 for fused optimizers.
  double foreach_tensors = 0;
  bool fp32_gemms = false;  // the GEMMs run in fp32 (no tensor cores): planner/roofline.hpp's fp32 efficiency
};

// trained_params: parameters the optimizer updates on this GPU (ZeRO shards, LoRA adapters);
// optimizer_bytes: what the update reads and writes once, as planner/plan.cpp counts it from the inventory.
step_ops list_step_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                       double trained_params, double trained_tensors, double optimizer_bytes);

// list_step_ops in two parts, so that a sweep builds the ops once for every accumulation count: one
// micro-batch's forward and backward with the optimizer step once (run.grad_accum is not read), then every
// op but the optimizer's, and the forward, recomputation and backward launches, times the micro-batches.
step_ops list_micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                              double trained_params, double trained_tensors, double optimizer_bytes);
void repeat_micro_batches(step_ops& ops, std::uint64_t grad_accum);

}  // namespace trainplan
