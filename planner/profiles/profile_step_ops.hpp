#pragma once
// The operations of one training step as the run's training stack runs them (planner/time/step_ops.hpp).
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/time/step_ops.hpp"

namespace trainplan {

// trained_params: parameters the optimizer updates on this GPU (ZeRO shards, LoRA adapters);
// optimizer_bytes: what the update reads and writes once, as planner/evaluate/plan.cpp counts it from the inventory.
step_ops list_step_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                       double trained_params, double trained_tensors, double optimizer_bytes);

// list_step_ops in two parts, so that a sweep builds the ops once for every accumulation count: one
// micro-batch's forward and backward with the optimizer step once (run.grad_accum is not read), then
// repeat_micro_batches.
step_ops list_micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                              double trained_params, double trained_tensors, double optimizer_bytes);

}  // namespace trainplan
