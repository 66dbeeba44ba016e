#include "planner/time/flops.hpp"

#include <algorithm>

#include "planner/run/packing.hpp"
#include "planner/run/selective_checkpoint.hpp"

namespace trainplan {

step_flops count_flops(const model_spec& m, const run_config& run, const param_counts& params, const stack_traits& stack) {
  step_flops f;
  const double L = static_cast<double>(m.layers);
  const double s = static_cast<double>(run.seq);
  f.tokens_per_step = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch) *
                      static_cast<double>(run.grad_accum);
  f.gemm_forward_per_token = 2.0 * static_cast<double>(params.active_matmul);  // top-k experts with MoE
  // QK^T over heads x head_dim, the probabilities times V over heads x v_head_dim: 2 FLOPs per product term.
  const double score_and_value_width = static_cast<double>(m.q_width() + m.out_width());
  // Packed documents (--packing) attend within themselves only: the model's attention is theirs.
  f.attention_forward_per_token = 2.0 * attended_keys(m, run.seq, run.packing_doc_tokens) * score_and_value_width;
  const double forward = (f.gemm_forward_per_token + f.attention_forward_per_token) * f.tokens_per_step;
  // Backward = input gradients (one forward's work) + weight gradients (another); frozen weights (LoRA,
  // QLoRA) need no weight gradients, so their backward is one forward's work (adapters are negligible).
  const double passes = run.finetune == finetune_kind::full ? 3.0 : 2.0;
  f.model_per_step = passes * forward;
  // The model FLOPs split between the two forward terms: the passes per token, applied to each term.
  const double passes_per_token = f.model_per_step / (f.gemm_forward_per_token + f.attention_forward_per_token) / f.tokens_per_step;
  f.model_gemm_per_step = passes_per_token * f.gemm_forward_per_token * f.tokens_per_step;
  f.model_attention_per_step = passes_per_token * f.attention_forward_per_token * f.tokens_per_step;

  // What the attention kernel computes: the window (and, packed, each document: flash_attn_varlen_func over
  // cu_seqlens), or the whole square with the rest masked (a window or packing given as a mask).
  const double computed_attention_per_token = kernel_skips_window(run, stack) ? f.attention_forward_per_token
                                                                           : 2.0 * L * s * score_and_value_width;
  f.masked_attention_per_step = passes * (computed_attention_per_token - f.attention_forward_per_token) * f.tokens_per_step;
  const double attention_core = computed_attention_per_token * f.tokens_per_step;
  if (run.recompute == recompute_mode::full) {
    const double layer_gemm = 2.0 * static_cast<double>(params.active_matmul_layers_total) * f.tokens_per_step;
    f.recompute_per_step = layer_gemm + attention_core;
    if (attention_tiled(run.attention)) f.recompute_per_step += attention_core;  // and again in its bwd
  } else if (run.recompute == recompute_mode::selective &&
             stack.selective_recompute == selective_recompute_kind::op_policy) {
    // torchtitan's per-op policy (planner/run/selective_checkpoint.hpp): the even matmuls of each layer rerun,
    // 2 x tokens x their weights; attention's output is kept (flash attention still recomputes its scores in
    // its backward, which counts as below).
    f.recompute_per_step = 2.0 * static_cast<double>(op_policy_recomputed_matmul_weights(m)) * L * f.tokens_per_step;
    if (attention_tiled(run.attention)) f.recompute_per_step += attention_core;
  } else if (run.recompute == recompute_mode::selective || attention_tiled(run.attention)) {
    f.recompute_per_step = attention_core;
  }
  // The head's forward, input-gradient and (unless frozen) weight-gradient GEMMs run over every stored row.
  const double padded_rows = static_cast<double>(vocab_rows(m, stack.vocab_pad_multiple) - m.vocab);
  f.padded_vocab_per_step = passes * 2.0 * static_cast<double>(m.hidden) * padded_rows * f.tokens_per_step;
  f.hardware_per_step = f.model_per_step + f.recompute_per_step + f.masked_attention_per_step + f.padded_vocab_per_step;
  f.six_n_per_step = 6.0 * static_cast<double>(params.active) * f.tokens_per_step;  // 6 x active with MoE
  return f;
}

double attended_keys(const model_spec& m, std::uint64_t seq, std::uint64_t doc_tokens) {
  const double s = static_cast<double>(seq), sliding = static_cast<double>(m.sliding_layers());
  if (doc_tokens == 0 || doc_tokens >= seq) {
    const double window = std::min(s, static_cast<double>(m.sliding_window_tokens));
    return (static_cast<double>(m.layers) - sliding) * s + sliding * window;
  }
  // Packed: per token, the row's sum over its documents (planner/run/packing.hpp) over the row's tokens.
  const packed_row row = packed_row_of(seq, doc_tokens);
  return ((static_cast<double>(m.layers) - sliding) * packed_attended_key_sum(row) +
          sliding * packed_attended_key_sum(row, m.sliding_window_tokens)) / s;
}

bool kernel_skips_window(const run_config& run, const stack_traits& stack) {
  // The flash-attn package takes the window as its window_size (transformers' _flash_attention_forward passes
  // it), whichever stack calls it.
  if (run.attention == attention_kind::flash_attention_2) return true;
  return run.attention == attention_kind::flash && stack.passes_window_to_kernel;
}

}  // namespace trainplan
