#pragma once
// The frame every profile's list of a step's operations is built in (planner/time/step_ops.hpp): the row groups
// of one micro-batch, which the profile fills with its layer's and head's ops; the optimizer's kernels; and the
// PyTorch runtime's own per-step work (torch.amp.GradScaler, gradient accumulation's in-place adds).
#include <functional>

#include "planner/model/model_spec.hpp"
#include "planner/profiles/profile.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/time/step_ops_builder.hpp"

namespace trainplan {

// One micro-batch's row groups (planner/time/step_ops_builder.hpp): `layer` runs once per layer and pass,
// `norms` likewise but replicated across tensor-parallel ranks unless sequence parallelism splits it, `head`
// once per pass; the MLP's rows go to `dense_mlp` or `moe_mlp`, the same group as `layer` unless DeepSeek's
// dense first layers differ from its MoE layers.
struct step_rows {
  ops::row_group& layer;
  ops::row_group& norms;
  ops::row_group& head;
  ops::row_group& dense_mlp;
  ops::row_group& moe_mlp;
};

// What a stack's --recompute selective reruns of a layer's forward in its backward.
enum class selective_rerun {
  own_rows,        // what the profile's own rows say (llm.c's GELU): nothing here
  attention_core,  // the attention core (Korthikanti et al. 2022, Sec. 5), which flash attention recomputes anyway
  op_policy,       // torchtitan's per-op policy (planner/run/selective_checkpoint.hpp): the layer's forward, but
                   // for the ops the profile adds with row_group::output_saved set and the attention core
};

// One micro-batch's forward and backward (recomputation included) with the rows `add_rows` adds; the launches
// counted by phase.
step_ops micro_batch_step_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                              selective_rerun selective_reruns, const std::function<void(step_rows&)>& add_rows);

// How an optimizer step runs its update.
enum class optimizer_kernels {
  pytorch_foreach,     // PyTorch's foreach AdamW: eight list operations over every parameter tensor
  multi_tensor_fused,  // one fused multi-tensor kernel over the parameter tensors (PyTorch fused, Apex, TE)
  single_kernel,       // one kernel over one flat parameter buffer (llm.c)
};
void add_optimizer_op(step_ops& ops, optimizer_kernels kernels, const trained_share& trained);

// PyTorch's multi_tensor_apply launches for a foreach or fused operation over `tensors` tensors of `elements`
// elements in all, at most `max_tensors` a launch.
double multi_tensor_launches(double elements, double tensors, double max_tensors);
// The dtype of the gradients PyTorch's optimizer reads, with peft's adapters' when they train.
dtype peft_trained_grad_dtype(const run_config& run, const precision_layout& layout);
// torch.amp.GradScaler's per-micro-batch and per-step work. syncs: the host waits for found_inf before the
// optimizer step (every optimizer but PyTorch's fused ones).
void add_grad_scaler(step_ops& ops, double params, double grad_bytes, double tensors, bool syncs);
// One micro-batch's AccumulateGrad adds and the loop's loss division (step_ops::accumulation_ops).
void add_accumulation_ops(step_ops& ops, double grad_bytes, double tensors);

}  // namespace trainplan
