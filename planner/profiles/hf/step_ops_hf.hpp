#pragma once
// Internal to planner/time/step_ops.cpp: the kernels PyTorch eager launches for a Hugging Face GPT-2 or Llama
// training step (transformers 5.17, torch 2.11), layer by layer and for the embedding, head and loss.
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/time/step_ops_builder.hpp"

namespace trainplan {

// `layer`: every layer's rows; the MLP's go to `dense_mlp` or `moe_mlp` (the same group as `layer` unless
// DeepSeek's dense first layers differ from its MoE layers).
void add_hf_step_ops(ops::row_group& layer, ops::row_group& dense_mlp, ops::row_group& moe_mlp, ops::row_group& head,
                     const model_spec& m, const run_config& run, const precision_layout& layout);

}  // namespace trainplan
