#include "planner/profiles/profile_step_ops.hpp"

#include <algorithm>
#include <cmath>

#include "planner/time/flops.hpp"
#include "planner/run/moe.hpp"
#include "planner/model/param_count.hpp"
#include "planner/time/step_ops_builder.hpp"
#include "planner/profiles/hf/step_ops_hf.hpp"

namespace trainplan {

namespace {

double bytes_of(dtype t) { return static_cast<double>(dtype_bytes(t)); }

// A Mixture-of-Experts MLP as Megatron-Core runs it (MoELayer: router, token permutation, grouped GEMMs
// over the local experts, unpermutation): the router GEMM, its softmax and top-k, the permutation of the
// tokens to R = routed_rows rows (after the all-to-all each GPU holds R rows of its experts when routing is
// balanced), each local expert's two GEMMs over its R / (E/ep) rows, SwiGLU, and the weighted
// unpermutation. The all-to-all itself is communication, which the step time does not model. Padded rows
// (a capacity factor) are computed like real ones.
void add_fused_moe(ops::row_group& layer, const model_spec& m, const run_config& run, double c) {
  const double T = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch);
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn);
  const double E = static_cast<double>(m.experts), k = static_cast<double>(m.experts_per_token);
  const double R = static_cast<double>(routed_rows(m, run)), local = static_cast<double>(local_experts(m, run));
  layer.gemm("moe.router", T, E, h, c, c);
  layer.add("moe.routing", op_class::elementwise, T * E * (c + 4) + T * k * 12, 2, T * E * 8 + T * k * 8, 2);
  layer.add("moe.permute", op_class::elementwise, T * h * c + R * h * c + R * 8, 1, 2 * R * h * c, 1);
  layer.gemm("moe.experts.gate_up", R / local, 2 * f, h, c, c, true, op_class::gemm, local);
  layer.add("moe.swiglu", op_class::elementwise, 3 * R * f * c, 1, 5 * R * f * c, 1);
  layer.gemm("moe.experts.down", R / local, h, f, c, c, true, op_class::gemm, local);
  layer.add("moe.unpermute", op_class::elementwise, R * h * c + R * 4 + T * h * c, 1, 2 * R * h * c + T * h * c, 1);
  if (m.shared_expert_ffn > 0) {  // a dense SwiGLU over every token, scaled by a sigmoid gate
    const double fs = static_cast<double>(m.shared_expert_ffn);
    layer.gemm("moe.shared.gate_up", T, 2 * fs, h, c, c);
    layer.add("moe.shared.swiglu", op_class::elementwise, 3 * T * fs * c, 1, 5 * T * fs * c, 1);
    layer.gemm("moe.shared.down", T, h, fs, c, c);
    if (m.shared_expert_gate) {
      layer.gemm("moe.shared.gate", T, 1, h, c, c);
      layer.add("moe.shared.scale", op_class::elementwise, 3 * T * h * c, 2, 5 * T * h * c, 2);
    } else {
      layer.add("moe.shared.add", op_class::elementwise, 3 * T * h * c, 1, 0, 0);
    }
  }
}

// Multi-head latent attention's projections (Megatron-Core MLASelfAttention): the query and key-value down
// projections, their RMSNorms, and the up projections to the heads' queries, keys and values.
void add_fused_mla_projections(ops::row_group& layer, const model_spec& m, double T, double c) {
  const double h = static_cast<double>(m.hidden), qw = static_cast<double>(m.q_width());
  const double qr = static_cast<double>(m.q_lora_rank), kvr = static_cast<double>(m.kv_lora_rank);
  const double rope = static_cast<double>(m.rope_head_dim);
  const double kv_up = static_cast<double>(m.heads) * static_cast<double>(m.head_dim - m.rope_head_dim + m.v_dim());
  if (m.q_lora_rank > 0) {
    layer.gemm("attention.q_down", T, qr, h, c, c);
    layer.add("norm.q_latent", op_class::elementwise, 2 * T * qr * c, 1, 4 * T * qr * c, 2);
    layer.gemm("attention.q_up", T, qw, qr, c, c);
  } else {
    layer.gemm("attention.q", T, qw, h, c, c);
  }
  layer.gemm("attention.kv_down", T, kvr + rope, h, c, c);
  layer.add("norm.kv_latent", op_class::elementwise, 2 * T * kvr * c, 1, 4 * T * kvr * c, 2);
  layer.gemm("attention.kv_up", T, kv_up, kvr, c, c);
  // RoPE on the queries' and the shared key's rotary parts, and the keys assembled for every head.
  const double rotary = T * static_cast<double>(m.heads) * rope + T * rope, keys = T * static_cast<double>(m.kv_width());
  layer.add("attention.rotary", op_class::elementwise, 2 * rotary * c + 2 * keys * c, 2, 2 * rotary * c, 1);
}

// llm.c, Megatron-LM with Transformer Engine, and this project's harness: one kernel per norm, activation,
// residual and loss, flash attention as one fused kernel (the scores recomputed in its backward), GEMMs
// through cuBLAS. c: bytes of an activation element. The MLP's rows go to `dense_mlp` (a dense layer's) and
// `moe_mlp` (an MoE layer's): the same group as `layer` unless DeepSeek's dense first layers differ.
void add_fused_layer(ops::row_group& layer, ops::row_group& norms, ops::row_group& dense_mlp, ops::row_group& moe_mlp,
                     const model_spec& m, const run_config& run, double c) {
  const double T = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch);
  const double s = static_cast<double>(run.seq), h = static_cast<double>(m.hidden);
  const double qw = static_cast<double>(m.q_width()), kvw = static_cast<double>(m.kv_width());
  const double vw = static_cast<double>(m.v_width()), ow = static_cast<double>(m.out_width());
  const double qkvw = static_cast<double>(m.qkv_width()), E = T * h;
  const bool gpt = m.family == model_family::gpt;
  const bool llmc_gelu_recompute = run.framework == framework_kind::llmc && run.recompute != recompute_mode::none;

  norms.add("norm.attention", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
  if (m.is_mla()) add_fused_mla_projections(layer, m, T, c);
  else layer.gemm("attention.qkv", T, qkvw, h, c, c);
  // A sliding window: flash attention skips the keys outside it (the layers' average), eager computes them.
  const double keys = kernel_skips_window(run) ? attended_keys(m, run.seq) / static_cast<double>(m.layers) : s;
  const double attention_flops = 2 * T * keys * (qw + ow);  // planner/time/flops.hpp
  if (run.attention == attention_kind::flash) {
    const double io = T * (qw + kvw + vw + ow) * c;
    layer.add("attention.flash", op_class::attention, io, 1, 2.5 * io, 2, attention_flops, 3 * attention_flops, true);
  } else {
    const double heads = static_cast<double>(m.heads), d = static_cast<double>(m.head_dim);
    const double batches = heads * static_cast<double>(run.micro_batch), N = batches * s * s;
    layer.gemm("attention.scores", s, s, d, c, c, true, op_class::attention, batches, true, true);
    layer.add("attention.softmax", op_class::attention, 2 * N * c, 1, 3 * N * c, 1, 0, 0, true);
    layer.gemm("attention.values", s, static_cast<double>(m.v_dim()), s, c, c, true, op_class::attention, batches, true, true);
  }
  layer.gemm("attention.out", T, h, ow, c, c);
  if (run.framework == framework_kind::trainplan) {
    // The harness adds the residual and runs the MLP's norm in one kernel (kernels/norm.hpp,
    // residual_norm_forward): residual and sum read, sum and output written, once each.
    norms.add("residual_norm.mlp", op_class::elementwise, 4 * E * c, 1, 4 * E * c, 2);
  } else {
    norms.add("residual.attention", op_class::elementwise, 3 * E * c, 1, 0, 0);
    norms.add("norm.mlp", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
  }
  if (gpt) {
    const double f = static_cast<double>(m.ffn), F = T * f;
    layer.gemm("mlp.fc", T, f, h, c, c);
    layer.add("mlp.gelu", op_class::elementwise, 2 * F * c, 1, (llmc_gelu_recompute ? 5 : 3) * F * c,
              llmc_gelu_recompute ? 2 : 1);
    layer.gemm("mlp.down", T, h, f, c, c);
  } else {
    if (!m.is_moe() || m.dense_layers > 0) {
      const double f = static_cast<double>(m.dense_mlp_width()), F = T * f;
      dense_mlp.gemm("mlp.gate_up", T, 2 * f, h, c, c);
      dense_mlp.add("mlp.swiglu", op_class::elementwise, 3 * F * c, 1, 5 * F * c, 1);
      dense_mlp.gemm("mlp.down", T, h, f, c, c);
    }
    if (m.is_moe()) add_fused_moe(moe_mlp, m, run, c);
  }
  norms.add("residual.mlp", op_class::elementwise, 3 * E * c, 1, 0, 0);
  if (run.dropout > 0) norms.add("dropout", op_class::elementwise, 2 * (2 * E * c + E), 2, 2 * (2 * E * c + E), 2);
}

void add_fused_head(ops::row_group& head, const model_spec& m, const run_config& run, double c, double w) {
  const double T = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch);
  const double h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab), E = T * h;
  // llm.c and the harness store the vocabulary padded to a multiple of 128 (planner/model/param_count.hpp
  // vocab_rows): the head's GEMMs and the embedding's gradient table run over the padded rows, the loss
  // over the V classes only.
  const double Vp = static_cast<double>(vocab_rows(m, vocab_pad_multiple(run.framework)));
  head.add("embedding", op_class::embedding, E * (w + c), 1, E * c + Vp * h * 4, 2);
  head.add("norm.final", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
  head.gemm("lm_head", T, Vp, h, c, c);
  // llm.c's fused classifier: softmax, loss and the logits' gradient in one kernel, written in place.
  if (run.framework == framework_kind::llmc)
    head.add("loss.fused_classifier", op_class::loss, 2 * T * V * c, 1, 0, 0);
  else
    head.add("loss.cross_entropy", op_class::loss, T * V * c + T * 8, 1, 2 * T * V * c, 1);
}

// PyTorch's multi_tensor_apply: chunks of 65,536 elements, at most 320 blocks and a depth-dependent number
// of tensors per launch (ATen/native/cuda/MultiTensorApply.cuh: 110, 64, 48, 36, 30 for depths 1 to 5).
double multi_tensor_launches(double elements, double tensors, double max_tensors) {
  return std::max({1.0, std::ceil(elements / (65536.0 * 320.0)), std::ceil(tensors / max_tensors)});
}

// The dtype of the gradients the optimizer reads under hf: the model's own, or peft's adapters' (fp32 unless
// the model was cast after get_peft_model), as planner/memory/inventory.cpp lays them out.
dtype hf_trained_grad_dtype(const run_config& run, const precision_layout& layout) {
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

// hf's per-micro-batch work of gradient accumulation. AccumulateGrad (torch/csrc/autograd/functions/
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

}  // namespace

step_ops list_micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                              double trained_params, double trained_tensors, double optimizer_bytes) {
  step_ops result;
  result.ops.reserve(64);
  result.fp32_gemms = layout.compute == dtype::fp32;
  const double mb = 1;  // repeat_micro_batches multiplies the rows out
  const double layers = static_cast<double>(m.layers / run.pp);
  const bool full = run.recompute == recompute_mode::full;
  // Selective recomputation reruns the attention core; flash attention already recomputes it in backward.
  const bool selective = run.recompute == recompute_mode::selective && run.attention != attention_kind::flash &&
                         run.framework != framework_kind::llmc;  // llm.c's "selective" recomputes GELU only
  const double tp = static_cast<double>(run.tp);

  auto layer_group = [&](double n) {
    return ops::row_group{result, mb * n * (full ? 2 : 1), mb * n, mb * n * (1 + (full ? 1 : 0) + (selective ? 1 : 0)),
                          1 / tp};
  };
  ops::row_group layer = layer_group(layers);
  ops::row_group norms = layer;
  norms.share = run.sequence_parallel ? 1 / tp : 1;  // norms, residuals, dropout: replicated across tp ranks
  ops::row_group head{result, mb, mb, mb, 1};
  // DeepSeek's dense first layers run another MLP than its MoE layers. With pipeline stages, the step
  // waits for the slowest stage: one of MoE layers only, when there are enough of them to fill one.
  const double moe_layers = std::min(layers, static_cast<double>(m.moe_layers()));
  ops::row_group dense_mlp = m.dense_layers > 0 ? layer_group(layers - moe_layers) : layer;
  ops::row_group moe_mlp = m.dense_layers > 0 ? layer_group(moe_layers) : layer;

  if (run.framework == framework_kind::hf) {
    add_hf_step_ops(layer, dense_mlp, moe_mlp, head, m, run, layout);
  } else {
    const double c = bytes_of(layout.activations), w = bytes_of(layout.weights);
    add_fused_layer(layer, norms, dense_mlp, moe_mlp, m, run, c);
    add_fused_head(head, m, run, c, w);
  }

  for (ops::row_group* g : {&layer, &norms, &head, &dense_mlp, &moe_mlp}) g->flush_launches();

  // The optimizer: one pass over what it updates. PyTorch's foreach AdamW runs eight list operations
  // (weight decay, lerp, mul, addcmul, sqrt, div, add, addcdiv: 4 p + 14 s + 2 g bytes per parameter with
  // p, s, g the weight, state and gradient sizes) where the fused kernel reads p, g, m, v and writes p, m, v
  // once (2 p + g + 4 s): with equal sizes, 20/7 of the fused traffic (torch/optim/adamw.py, _multi_tensor_adamw).
  step_op opt;
  opt.cls = op_class::optimizer;
  const bool foreach = run.framework == framework_kind::hf && run.optimizer_impl == optimizer_impl_kind::foreach_impl;
  if (foreach) {
    opt.name = "optimizer.foreach";
    opt.bytes = optimizer_bytes * 20.0 / 7.0;
    opt.kernels = 8 * multi_tensor_launches(trained_params, trained_tensors, 64);
    result.foreach_tensors = trained_tensors;
  } else if (run.framework == framework_kind::llmc) {
    opt.name = "optimizer.fused";  // one kernel over llm.c's single parameter buffer
    opt.bytes = optimizer_bytes;
    opt.kernels = 1;
  } else {
    opt.name = "optimizer.fused";
    opt.bytes = optimizer_bytes;
    opt.kernels = multi_tensor_launches(trained_params, trained_tensors, 36);
  }
  if (opt.bytes > 0) {
    result.ops.push_back(opt);
    result.launches.optimizer = opt.kernels;
  }
  if (run.framework == framework_kind::hf) {
    const double grad_bytes = trained_params * bytes_of(hf_trained_grad_dtype(run, layout));
    // Only PyTorch's fused optimizers unscale inside their kernel (_step_supports_amp_scaling).
    const bool syncs = run.optimizer_impl != optimizer_impl_kind::fused;
    if (layout.loss_scaling) add_grad_scaler(result, trained_params, grad_bytes, trained_tensors, syncs);
    add_accumulation_ops(result, grad_bytes, trained_tensors);
  }
  return result;
}

step_ops list_step_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                       double trained_params, double trained_tensors, double optimizer_bytes) {
  step_ops result = list_micro_batch_ops(m, run, layout, trained_params, trained_tensors, optimizer_bytes);
  repeat_micro_batches(result, run.grad_accum);
  return result;
}

}  // namespace trainplan
