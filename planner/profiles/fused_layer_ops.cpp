#include "planner/profiles/fused_layer_ops.hpp"

#include <algorithm>

#include "planner/run/moe.hpp"
#include "planner/time/flops.hpp"

namespace trainplan {
namespace {

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

}  // namespace

// llm.c, Megatron-LM with Transformer Engine, and this project's harness: one kernel per norm, activation,
// residual and loss, flash attention as one fused kernel (the scores recomputed in its backward), GEMMs
// through cuBLAS. c: bytes of an activation element. The MLP's rows go to `dense_mlp` (a dense layer's) and
// `moe_mlp` (an MoE layer's): the same group as `layer` unless DeepSeek's dense first layers differ.
void add_fused_layer(ops::row_group& layer, ops::row_group& norms, ops::row_group& dense_mlp, ops::row_group& moe_mlp,
                     const model_spec& m, const run_config& run, double c, const fused_layer_options& options) {
  const double T = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch);
  const double s = static_cast<double>(run.seq), h = static_cast<double>(m.hidden);
  const double qw = static_cast<double>(m.q_width()), kvw = static_cast<double>(m.kv_width());
  const double vw = static_cast<double>(m.v_width()), ow = static_cast<double>(m.out_width());
  const double qkvw = static_cast<double>(m.qkv_width()), E = T * h;
  const bool gpt = m.family == model_family::gpt;
  const bool gelu_recomputed = options.recomputes_gelu && run.recompute != recompute_mode::none;

  norms.add("norm.attention", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
  if (m.is_mla()) add_fused_mla_projections(layer, m, T, c);
  else layer.gemm("attention.qkv", T, qkvw, h, c, c);
  // A sliding window: flash attention skips the keys outside it (the layers' average), eager computes them.
  const double keys = kernel_skips_window(run, options.traits) ? attended_keys(m, run.seq) / static_cast<double>(m.layers) : s;
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
  if (options.fused_residual_norm) {
    // The residual add and the MLP's norm in one kernel (the harness's kernels/norm.hpp,
    // residual_norm_forward): residual and sum read, sum and output written, once each.
    norms.add("residual_norm.mlp", op_class::elementwise, 4 * E * c, 1, 4 * E * c, 2);
  } else {
    norms.add("residual.attention", op_class::elementwise, 3 * E * c, 1, 0, 0);
    norms.add("norm.mlp", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
  }
  if (gpt) {
    const double f = static_cast<double>(m.ffn), F = T * f;
    layer.gemm("mlp.fc", T, f, h, c, c);
    layer.add("mlp.gelu", op_class::elementwise, 2 * F * c, 1, (gelu_recomputed ? 5 : 3) * F * c,
              gelu_recomputed ? 2 : 1);
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

void add_fused_head(ops::row_group& head, const model_spec& m, const run_config& run, double c, double w,
                    const fused_layer_options& options) {
  const double T = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch);
  const double h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab), E = T * h;
  // A stack that pads its vocabulary (planner/model/param_count.hpp vocab_rows) runs the head's GEMMs and the
  // embedding's gradient table over the padded rows, the loss over the V classes only.
  const double Vp = static_cast<double>(vocab_rows(m, options.traits.vocab_pad_multiple));
  head.add("embedding", op_class::embedding, E * (w + c), 1, E * c + Vp * h * 4, 2);
  head.add("norm.final", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
  head.gemm("lm_head", T, Vp, h, c, c);
  // llm.c's fused classifier: softmax, loss and the logits' gradient in one kernel, written in place.
  if (options.fused_classifier)
    head.add("loss.fused_classifier", op_class::loss, 2 * T * V * c, 1, 0, 0);
  else
    head.add("loss.cross_entropy", op_class::loss, T * V * c + T * 8, 1, 2 * T * V * c, 1);
}

// PyTorch's multi_tensor_apply: chunks of 65,536 elements, at most 320 blocks and a depth-dependent number

}  // namespace trainplan
