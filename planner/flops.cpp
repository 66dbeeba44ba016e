#include "planner/flops.hpp"

namespace trainplan {

step_flops count_flops(const model_spec& m, const run_config& run, const param_counts& params) {
  step_flops f;
  const double L = static_cast<double>(m.layers);
  const double s = static_cast<double>(run.seq);
  f.tokens_per_step = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch) *
                      static_cast<double>(run.grad_accum);
  f.gemm_forward_per_token = 2.0 * static_cast<double>(params.active_matmul);  // top-k experts with MoE
  f.attention_forward_per_token = 4.0 * L * s * static_cast<double>(m.q_width());
  const double forward = (f.gemm_forward_per_token + f.attention_forward_per_token) * f.tokens_per_step;
  // Backward = input gradients (one forward's work) + weight gradients (another); frozen weights (LoRA,
  // QLoRA) need no weight gradients, so their backward is one forward's work (adapters are negligible).
  f.model_per_step = (run.finetune == finetune_kind::full ? 3.0 : 2.0) * forward;

  const double attention_core = f.attention_forward_per_token * f.tokens_per_step;
  if (run.recompute == recompute_mode::full) {
    const double layer_gemm = 2.0 * static_cast<double>(params.active_matmul_per_layer) * L * f.tokens_per_step;
    f.recompute_per_step = layer_gemm + attention_core;
    if (run.attention == attention_kind::flash) f.recompute_per_step += attention_core;  // and again in its bwd
  } else if (run.recompute == recompute_mode::selective || run.attention == attention_kind::flash) {
    f.recompute_per_step = attention_core;
  }
  f.hardware_per_step = f.model_per_step + f.recompute_per_step;
  f.six_n_per_step = 6.0 * static_cast<double>(params.active) * f.tokens_per_step;  // 6 x active with MoE
  return f;
}

}  // namespace trainplan
