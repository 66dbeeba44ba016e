#pragma once
// How PyTorch + Hugging Face store and run a model (planner/run/stack_traits.hpp), shared by the hf profile's
// files.
#include "planner/run/stack_traits.hpp"

namespace trainplan {

// How PyTorch + Hugging Face store and run a model (hf_profile().traits).
inline constexpr stack_traits hf_traits{
    .vocab_pad_multiple = 1,
    .passes_window_to_kernel = false,  // SDPA receives a sliding window as a mask over the full scores
    .keeps_fused_projections = true,   // Phi-3's qkv_proj is one module, which peft adapts as one
};

}  // namespace trainplan
