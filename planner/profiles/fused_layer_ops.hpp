#pragma once
// The operations of a step whose kernels fuse each layer's work (llm.c, Megatron-LM with Transformer Engine,
// this project's harness): one kernel per norm, activation, residual and loss, flash attention as one fused
// kernel (the scores recomputed in its backward), GEMMs through cuBLAS; Mixture-of-Experts layers as
// Megatron-Core's MoELayer and latent attention as its MLASelfAttention run them.
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"
#include "planner/time/step_ops_builder.hpp"

namespace trainplan {

// Where the stacks' fused kernels differ.
struct fused_layer_options {
  stack_traits traits;
  bool fused_residual_norm = false;  // the residual add and the next norm in one kernel (the harness)
  bool recomputes_gelu = false;      // any recomputation reruns GELU in the MLP's backward (llm.c's -r 1 and -r 2)
  bool fused_classifier = false;     // softmax, loss and the logits' gradient in one kernel, in place (llm.c)
};

// One layer's rows per pass: `layer` every layer's, `norms` the norms, residuals and dropout (replicated across
// tensor-parallel ranks without sequence parallelism), the MLP's to `dense_mlp` or `moe_mlp` (the same group as
// `layer` unless DeepSeek's dense first layers differ from its MoE layers). c: bytes of an activation element.
void add_fused_layer(ops::row_group& layer, ops::row_group& norms, ops::row_group& dense_mlp, ops::row_group& moe_mlp,
                     const model_spec& m, const run_config& run, double c, const fused_layer_options& options);
// The embedding, the final norm, the head's GEMM and the loss. w: bytes of a weight element.
void add_fused_head(ops::row_group& head, const model_spec& m, const run_config& run, double c, double w,
                    const fused_layer_options& options);

}  // namespace trainplan
