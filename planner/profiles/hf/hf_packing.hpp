#pragma once
// Sequence packing under the stacks that run Hugging Face transformers' modules (--packing DOC_TOKENS): what
// they refuse and the report's line. The mechanism itself lives where it acts: the attention's FLOPs
// (hf_kernels.cpp, planner/time/flops.cpp), SDPA's block-diagonal mask (hf_sdpa.cpp), flash-attn's varlen rows
// (activations_hf_rows_attention.hpp). Internal to planner/profiles/hf/ and the stacks built on it.
#include <string>
#include <string_view>

#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// Throws input_error naming --packing (and `stack`) for a packed run these stacks are not modelled to train.
void check_hf_packing(std::string_view stack, const run_config& run);

// The report's line on the packing assumption; empty without --packing.
std::string hf_packing_line(const model_spec& m, const run_config& run, const precision_layout& layout);

}  // namespace trainplan
