// PyTorch's SDPA backend as --framework hf meets it (torch 2.11 on an H100, transformers 5.17's
// sdpa_attention_forward and masking_utils).
#include "planner/profiles/hf/hf_sdpa.hpp"

#include <fmt/format.h>

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

sdpa_backend hf_sdpa_backend(const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (run.attention == attention_kind::eager) return sdpa_backend::eager;
  // The flash-attn package saves what SDPA's fused kernel saves (its rows add its rng_state and workspaces).
  if (run.attention == attention_kind::flash_attention_2) return sdpa_backend::fused;
  // FlashAttention takes one head size for queries, keys and values; multi-head latent attention's values
  // are narrower (DeepSeek-V3: 128 against 192), which PyTorch's memory-efficient kernel accepts
  // (sdp_utils.cpp: check_head_dim_size_flash against the efficient kernel's checks).
  if (m.v_dim() != m.head_dim) return sdpa_backend::efficient;
  if (layout.compute == dtype::bf16 || layout.compute == dtype::fp16) return sdpa_backend::fused;
  // A mask (FlashAttention takes none) goes to cuDNN too: it takes a [b|1, 1, s, s] bias, and torch 2.11's
  // CUDA 13 wheels (cuDNN 9.17) rank it first on an H100 (cuda/sdp_utils.cpp, check_prefer_cudnn_attention).
  // fp32: FlashAttention and cuDNN take only 16-bit inputs; the memory-efficient kernel takes fp32 but not
  // grouped-query heads (the recorded inventory shows the math path for fp32 Llama with 4 kv heads of 16), unless
  // a mask made transformers repeat k and v to every head.
  return m.kv_heads == m.heads || hf_sliding_window_mask(m, run) ? sdpa_backend::efficient : sdpa_backend::math;
}


}  // namespace trainplan
