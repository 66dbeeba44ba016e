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
  double flops = 0;            // per step: every micro-batch, layer, forward, backward and recomputation
  double bytes = 0;            // read + written per step
  double kernels = 0;          // launches per step
  double m = 0, n = 0, k = 0;  // GEMM: the shape of one launch
};

struct step_ops {
  std::vector<step_op> ops;
  // Parameter tensors PyTorch's foreach AdamW walks in Python each step (bias corrections and step sizes
  // are per-tensor Python lists); 0 for fused optimizers.
  double foreach_tensors = 0;
  bool fp32_gemms = false;  // the GEMMs run in fp32 (no tensor cores): planner/roofline.hpp's fp32 efficiency
};

// trained_params: parameters the optimizer updates on this GPU (ZeRO shards, LoRA adapters);
// optimizer_bytes: what the update reads and writes once, as planner/plan.cpp counts it from the inventory.
step_ops list_step_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                       double trained_params, double trained_tensors, double optimizer_bytes);

}  // namespace trainplan
