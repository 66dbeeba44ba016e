#pragma once
// --recompute selective over Hugging Face's modules: torchtitan's per-op policy (planner/run/selective_checkpoint.hpp),
// for the stacks built on these modules that offer it. The rows and kernels model it (activations_hf.cpp keeps the outputs of
// the rows marked mm_output and attention_output; hf_layer_ops.cpp's counted_linear keeps their GEMMs out of the
// recomputation); this says where they can. Internal to planner/profiles/hf/ and the stacks built on it.
#include <string>
#include <string_view>

#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// Throws input_error naming --recompute selective for a run the policy is not modelled for: layers whose matmuls
// are not the seven aten.mm calls of a Llama decoder layer (GPT-2's Conv1D addmm, fused projections, biased q, k
// and v, experts), attention that is not one of SDPA's fused kernels, a compiled layer, or a forward the rows do
// not write op by op.
void check_hf_selective_checkpoint(std::string_view stack, const model_spec& m, const run_config& run,
                                   const precision_layout& layout);

// The report's line on the policy; empty unless --recompute selective.
std::string hf_selective_checkpoint_line(const run_config& run);

}  // namespace trainplan
