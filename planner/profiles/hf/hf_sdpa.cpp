// PyTorch's SDPA backend as --framework hf meets it (torch 2.11's choice by the GPU's compute capability,
// checked against its inventories on an H100; transformers 5.17's sdpa_attention_forward and masking_utils).
#include "planner/profiles/hf/hf_sdpa.hpp"

#include <fmt/format.h>

#include "planner/run/packing.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

std::string_view sdpa_backend_name(sdpa_backend b) {
  switch (b) {
    case sdpa_backend::fused: return "cuDNN/FlashAttention";
    case sdpa_backend::efficient: return "memory-efficient";
    case sdpa_backend::math: return "math";
    case sdpa_backend::eager: return "eager (attn_implementation=\"eager\")";
  }
  return "?";
}

void check_hf_attention(std::string_view stack, const model_spec& m, const precision_layout& layout, const run_config& run) {
  if (run.attention != attention_kind::flash_attention_2) return;
  // flash-attn's kernels take fp16 and bf16 only (flash_api.cpp: "FlashAttention only support fp16 and bf16 data type").
  if (layout.compute != dtype::bf16 && layout.compute != dtype::fp16)
    throw input_error(fmt::format("--attention flash_attention_2 runs in bf16 or fp16 only, not {} (--framework {}: "
                                  "--attention sdpa or eager)", dtype_name(layout.compute), stack));
  // flash-attn 2 runs on Ampere, Ada and Hopper GPUs and later (its README; flash_api.cpp refuses older ones).
  const compute_capability& cc = run.gpu_capability;
  if (cc.known() && !cc.at_least(8, 0))
    throw input_error(fmt::format("--attention flash_attention_2 needs a GPU of compute capability 8.0 or later, not {}.{} "
                                  "(--framework {}: --attention sdpa or eager)", cc.major, cc.minor, stack));
  if (m.is_mla())
    throw input_error(fmt::format("--attention flash_attention_2 with latent attention (values narrower than keys, "
                                  "padded by transformers) is not modelled under --framework {}: --attention sdpa", stack));
}

bool hf_sliding_window_mask(const model_spec& m, const run_config& run) {
  // masking_utils._ignore_causal_mask_sdpa lets SDPA's is_causal stand in for the mask only while
  // kv_length < sliding_window; Gemma 2's alternating layers (two masks) are not modelled here.
  // (The flash-attn package takes the window as its window_size: transformers builds no mask for it.)
  return run.attention == attention_kind::flash && m.sliding_window_tokens > 0 && m.sliding_window_global_every == 0 &&
         run.seq >= m.sliding_window_tokens;
}

bool hf_packing_mask(const run_config& run) {
  // transformers 5's masking_utils.create_causal_mask: with position_ids and no attention_mask,
  // find_packed_sequence_indices finds where position_ids restart (each row's documents); a packed row makes
  // and_masks(causal, packed_sequence_mask_function) the mask and allow_is_causal_skip False, so sdpa_mask
  // materialises a bool [b, 1, s, s] block-diagonal causal mask (a row of one document: none, is_causal).
  return run.attention == attention_kind::flash && packs_documents(run);
}

bool hf_sdpa_mask(const model_spec& m, const run_config& run) { return hf_sliding_window_mask(m, run) || hf_packing_mask(run); }

namespace {

// torch 2.11's CUDA 13 wheels rank cuDNN attention first on sm_9x and sm_10x (cuda/sdp_utils.cpp,
// check_prefer_cudnn_attention: cuDNN newer than 9.15 and major 9 or 10); elsewhere the default order holds:
// FlashAttention, memory-efficient, math (cuDNN last, behind math, which always runs).
bool cudnn_first(const compute_capability& cc) { return cc.major == 9 || cc.major == 10; }

// Whether SDPA's fused kernel (cuDNN or FlashAttention) takes a 16-bit training run on the GPU (sdp_utils.cpp's
// filters). Not known: as on the H100.
bool fused_takes(const model_spec& m, const run_config& run) {
  const compute_capability& cc = run.gpu_capability;
  if (!cc.known()) return true;
  // Both need sm_80 or later (check_flash_attention_hardware_support, check_cudnn_hardware_support).
  if (!cc.at_least(8, 0)) return false;
  // cuDNN takes a mask too, as a [b|1, 1, s, s] bias (torch 2.11's CUDA 13 wheels ship cuDNN 9.17).
  if (cudnn_first(cc)) return true;
  // FlashAttention takes no mask (check_for_attn_mask), head sizes up to 256 (check_head_dim_size_flash), and on
  // sm_86-sm_89 and sm_12x trains a head size in (192, 224], or in (224, 256] with dropout, not at all
  // (check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120).
  if (hf_sdpa_mask(m, run) || m.head_dim > 256) return false;
  const bool narrow_backward = cc.within({8, 6}, {8, 9}) || cc.within({12, 0}, {12, 1});
  return !narrow_backward || m.head_dim <= 192 || (m.head_dim > 224 && run.dropout == 0);
}

}  // namespace

std::string_view hf_sdpa_kernel_name(sdpa_backend b, const run_config& run) {
  const compute_capability& cc = run.gpu_capability;
  if (b != sdpa_backend::fused || run.attention == attention_kind::flash_attention_2 || !cc.known() || cudnn_first(cc))
    return sdpa_backend_name(b);
  return "FlashAttention (PyTorch's own; ranked first below sm_90)";
}

sdpa_backend hf_sdpa_backend(const model_spec& m, const run_config& run, const precision_layout& layout) {
  return hf_sdpa_backend(m, run, layout, stack_traits{});  // transformers' modules: the grouped heads as they are
}

sdpa_backend hf_sdpa_backend(const model_spec& m, const run_config& run, const precision_layout& layout,
                             const stack_traits& traits) {
  if (run.attention == attention_kind::eager) return sdpa_backend::eager;
  // The flash-attn package saves what SDPA's fused kernel saves (its rows add its rng_state and workspaces).
  if (run.attention == attention_kind::flash_attention_2) return sdpa_backend::fused;
  // Below sm_80 no fused kernel runs and the memory-efficient one takes fp16 and fp32, not bf16
  // (can_use_mem_efficient_attention's less_than_sm80 dtypes): bf16 goes to the math path.
  const compute_capability& cc = run.gpu_capability;
  if (layout.compute == dtype::bf16 && cc.known() && !cc.at_least(8, 0)) return sdpa_backend::math;
  // FlashAttention takes one head size for queries, keys and values; multi-head latent attention's values
  // are narrower (DeepSeek-V3: 128 against 192), which PyTorch's memory-efficient kernel accepts
  // (sdp_utils.cpp: check_head_dim_size_flash against the efficient kernel's checks).
  if (m.v_dim() != m.head_dim) return sdpa_backend::efficient;
  const bool sixteen_bit = layout.compute == dtype::bf16 || layout.compute == dtype::fp16;
  if (sixteen_bit && fused_takes(m, run)) return sdpa_backend::fused;
  // fp32 (FlashAttention and cuDNN take only 16-bit inputs), and 16-bit inputs the fused kernel refuses on this
  // GPU: the memory-efficient kernel takes them but not grouped-query heads (the recorded inventory shows the
  // math path for fp32 Llama with 4 kv heads of 16), unless a mask made transformers repeat k and v to every head,
  // or the stack's attention expanded them itself (torchtune's).
  return m.kv_heads == m.heads || hf_sdpa_mask(m, run) || traits.expands_kv_heads ? sdpa_backend::efficient
                                                                                   : sdpa_backend::math;
}


}  // namespace trainplan
