#pragma once
// Which attention kernel PyTorch's SDPA runs for a Hugging Face model (torch 2.11, transformers 5.17), and
// whether transformers hands it a mask: what both the hf profile's rows and its kernels depend on.
#include <string_view>

#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"

namespace trainplan {

// Which kernel torch.nn.functional.scaled_dot_product_attention runs (attention_kind::flash under hf
// means the model's attn_implementation="sdpa"; eager means "eager").
enum class sdpa_backend { fused, efficient, math, eager };
// PyTorch's choice for the dtype, head layout and the GPU's compute capability (run.gpu_capability;
// sdp_utils.cpp): cuDNN or FlashAttention for 16-bit inputs (on the H100 the inventories show cuDNN; both save q,
// k, v, the output and an fp32 log-sum-exp), memory-efficient attention for fp32 without grouped-query heads and
// for what neither fused kernel takes on the GPU, the math path for the rest.
sdpa_backend hf_sdpa_backend(const model_spec& m, const run_config& run, const precision_layout& layout);
// The same for a stack whose modules may hand SDPA keys and values expanded to every query head
// (stack_traits::expands_kv_heads): SDPA then sees as many key heads as query heads.
sdpa_backend hf_sdpa_backend(const model_spec& m, const run_config& run, const precision_layout& layout,
                             const stack_traits& traits);
// The kernel's name for the report: which of cuDNN and FlashAttention the fused backend is on the run's GPU.
std::string_view hf_sdpa_kernel_name(sdpa_backend b, const run_config& run);

// Whether transformers hands SDPA a sliding-window mask (every layer sliding, sequence >= window): then
// k and v are repeated to every query head and the fused kernel saves the mask as a [b,1,s,s] bias.
bool hf_sliding_window_mask(const model_spec& m, const run_config& run);
// Whether transformers hands SDPA a block-diagonal causal mask for packed documents (--packing under sdpa).
bool hf_packing_mask(const run_config& run);
// Either mask: SDPA then runs without is_causal, k and v repeated to every head, the mask saved as a bias.
bool hf_sdpa_mask(const model_spec& m, const run_config& run);
std::string_view sdpa_backend_name(sdpa_backend b);

// Throws input_error naming --attention (and `stack`) for a run the flash-attn package cannot train.
void check_hf_attention(std::string_view stack, const model_spec& m, const precision_layout& layout, const run_config& run);

}  // namespace trainplan
