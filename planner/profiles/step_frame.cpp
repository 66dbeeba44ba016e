#include "planner/profiles/step_frame.hpp"

#include <algorithm>
#include <cmath>

namespace trainplan {

// PyTorch's multi_tensor_apply: chunks of 65,536 elements, at most 320 blocks and a depth-dependent number
// of tensors per launch (ATen/native/cuda/MultiTensorApply.cuh: 110, 64, 48, 36, 30 for depths 1 to 5).
double multi_tensor_launches(double elements, double tensors, double max_tensors) {
  return std::max({1.0, std::ceil(elements / (65536.0 * 320.0)), std::ceil(tensors / max_tensors)});
}

// The model's own gradients, or peft's adapters' (fp32 unless the model was cast after get_peft_model), as
// planner/memory/model_state.cpp lays them out.
dtype peft_trained_grad_dtype(const run_config& run, const precision_layout& layout) {
  if (run.finetune != finetune_kind::full) return run.lora_fp32 ? dtype::fp32 : layout.weights;
  return layout.optimizer_grad_dtype();
}

// torch.amp.GradScaler around an optimizer (torch/amp/grad_scaler.py, torch 2.11), every step. Each
// micro-batch: scale(loss) is one multiplication, and its backward one more. Then step(): unless the
// optimizer unscales in its own kernel (_step_supports_amp_scaling, fused AdamW), unscale_ takes
// inv_scale = scale.double().reciprocal().float() and a zero found_inf (four kernels), copies both for the
// device (_MultiDeviceReplicator.get: two), runs _amp_foreach_non_finite_check_and_unscale_ over every
// gradient (one read and one write of each, in place: no per-parameter buffer), then _maybe_opt_step reads
// found_inf with .item(), a host-device synchronization. With fused AdamW, _check_inf_per_device runs the
// same check with a dummy inv_scale of 1 (two fills, two copies), sums found_inf (one kernel), multiplies the
// scale into optimizer.grad_scale (one) and _fused_adamw subtracts found_inf from every step count
// (_foreach_sub_ over the step tensors). update(): one _amp_update_scale_ kernel.
void add_grad_scaler(step_ops& ops, double params, double grad_bytes, double tensors, bool syncs) {
  step_op scale;
  scale.name = "grad_scaler.scale";
  scale.cls = op_class::loss;
  scale.bytes = 2 * 2 * 4;  // a scalar read and written, forward and backward
  scale.kernels = 2;
  scale.forward_share = 0.5f;
  ops.ops.push_back(scale);
  ops.launches.forward += 1, ops.launches.backward += 1;
  step_op check;
  check.name = "grad_scaler.unscale";
  check.cls = op_class::optimizer;
  check.grad_scaler = true;
  check.bytes = 2 * grad_bytes;
  const double check_launches = multi_tensor_launches(params, tensors, 110);  // a depth-1 foreach
  constexpr double copies = 2, update = 1;
  const double scalars = syncs ? 4 : 2 + 2 + multi_tensor_launches(tensors, tensors, 64);
  check.kernels = scalars + copies + check_launches + update;
  ops.ops.push_back(check);
  ops.launches.scaler = check.kernels;
  ops.host_waits_before_optimizer = syncs;
}

// PyTorch's per-micro-batch work of gradient accumulation. AccumulateGrad (torch/csrc/autograd/functions/
// accumulate_grad.h, accumulateGrad) steals the incoming gradient when .grad is undefined (the first
// micro-batch after zero_grad(set_to_none=True)) and otherwise adds it in place, variable_grad += new_grad:
// one kernel per trained parameter reading both and writing one. The training loop's loss / N is one
// kernel, and DivBackward0 one more. Listed as one micro-batch's worth of each (a sweep then repeats the
// list per accumulation count without reallocating it); repeat_micro_batches scales them and counts their
// launches.
void add_accumulation_ops(step_ops& ops, double grad_bytes, double tensors) {
  ops.accumulation_ops = static_cast<std::int32_t>(ops.ops.size());
  step_op& add = ops.ops.emplace_back();
  add.name = "autograd.accumulate_grad";
  add.cls = op_class::elementwise;
  add.bytes = 3 * grad_bytes;
  add.kernels = tensors;
  add.forward_share = 0;
  step_op& divide = ops.ops.emplace_back();
  divide.name = "loss.accumulation_divide";
  divide.cls = op_class::loss;
  divide.bytes = 2 * 2 * 4;
  divide.kernels = 2;
  divide.forward_share = 0.5f;
}


step_ops micro_batch_step_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                              selective_rerun selective_reruns, const std::function<void(step_rows&)>& add_rows) {
  step_ops result;
  result.ops.reserve(64);
  result.fp32_gemms = layout.compute == dtype::fp32;
  const double mb = 1;  // repeat_micro_batches multiplies the rows out
  const double layers = static_cast<double>(m.layers / run.pp);
  // torchtitan's per-op policy reruns the layer's forward as full recomputation does, less the saved ops
  // (row_group::output_saved) and the attention core, whose outputs it keeps.
  const bool op_policy = run.recompute == recompute_mode::selective && selective_reruns == selective_rerun::op_policy;
  const bool full = run.recompute == recompute_mode::full || op_policy;
  // Selective recomputation reruns the attention core; flash attention already recomputes it in backward.
  const bool selective = run.recompute == recompute_mode::selective && !attention_tiled(run.attention) &&
                         selective_reruns == selective_rerun::attention_core;
  const double tp = static_cast<double>(run.tp);

  auto layer_group = [&](double n) {
    return ops::row_group{result, mb * n * (full ? 2 : 1), mb * n,
                          mb * n * (1 + (full && !op_policy ? 1 : 0) + (selective ? 1 : 0)), 1 / tp};
  };
  ops::row_group layer = layer_group(layers);
  if (layer.backwards > 0) result.attention_forwards_per_backward = layer.attention_forwards / layer.backwards;
  ops::row_group norms = layer;
  norms.share = run.sequence_parallel ? 1 / tp : 1;  // norms, residuals, dropout: replicated across tp ranks
  // The head's rows go after the layers' whatever order a profile writes them in (its op list may begin with the
  // embedding): they are kept apart and appended.
  step_ops head_part;
  ops::row_group head{head_part, mb, mb, mb, 1};
  // DeepSeek's dense first layers run another MLP than its MoE layers. With pipeline stages, the step
  // waits for the slowest stage: one of MoE layers only, when there are enough of them to fill one.
  const double moe_layers = std::min(layers, static_cast<double>(m.moe_layers()));
  ops::row_group dense_mlp = m.dense_layers > 0 ? layer_group(layers - moe_layers) : layer;
  ops::row_group moe_mlp = m.dense_layers > 0 ? layer_group(moe_layers) : layer;
  step_rows rows{layer, norms, head, dense_mlp, moe_mlp};
  add_rows(rows);
  for (ops::row_group* g : {&layer, &norms, &head, &dense_mlp, &moe_mlp}) g->flush_launches();
  result.ops.insert(result.ops.end(), head_part.ops.begin(), head_part.ops.end());
  result.launches.forward += head_part.launches.forward;
  result.launches.recompute += head_part.launches.recompute;
  result.launches.backward += head_part.launches.backward;
  return result;
}

void add_optimizer_op(step_ops& ops, optimizer_kernels kernels, const trained_share& trained) {
  // The optimizer: one pass over what it updates. PyTorch's foreach AdamW runs eight list operations
  // (weight decay, lerp, mul, addcmul, sqrt, div, add, addcdiv: 4 p + 14 s + 2 g bytes per parameter with
  // p, s, g the weight, state and gradient sizes) where the fused kernel reads p, g, m, v and writes p, m, v
  // once (2 p + g + 4 s): with equal sizes, 20/7 of the fused traffic (torch/optim/adamw.py, _multi_tensor_adamw).
  step_op opt;
  opt.cls = op_class::optimizer;
  switch (kernels) {
    case optimizer_kernels::pytorch_foreach:
      opt.name = "optimizer.foreach";
      opt.bytes = trained.optimizer_bytes * 20.0 / 7.0;
      opt.kernels = 8 * multi_tensor_launches(trained.params, trained.tensors, 64);
      ops.foreach_tensors = trained.tensors;
      break;
    case optimizer_kernels::single_kernel:
      opt.name = "optimizer.fused";  // one kernel over a single parameter buffer
      opt.bytes = trained.optimizer_bytes;
      opt.kernels = 1;
      break;
    case optimizer_kernels::multi_tensor_fused:
      opt.name = "optimizer.fused";
      opt.bytes = trained.optimizer_bytes;
      opt.kernels = multi_tensor_launches(trained.params, trained.tensors, 36);
      break;
  }
  if (opt.bytes > 0) {
    ops.ops.push_back(opt);
    ops.launches.optimizer = opt.kernels;
  }
}

}  // namespace trainplan
