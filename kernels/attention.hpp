#pragma once
// Causal multi-head attention with grouped-query heads, on the packed projection (b, s, (a + 2kv) * d):
// per token q (a*d), then k (kv*d), then v (kv*d); output (b, s, a*d). Query head h reads key/value head
// h / (a / kv). Scores are scaled by 1/sqrt(d). Dropout on the probabilities uses the counter-based
// masks of dropout.hpp with index ((batch*a + head)*s + i)*s + j, so eager and flash drop the same ones.
#include <cstddef>
#include <cstdint>

#include "kernels/view.hpp"

namespace trainplan::kernels {

struct attention_shape {
  std::size_t batch = 1, seq = 1, heads = 1, kv_heads = 1, head_dim = 1;
  std::size_t qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::size_t out_width() const { return heads * head_dim; }
};

struct attention_dropout {
  float p = 0.0f;
  std::uint64_t seed = 0, site = 0;
};

// Eager (materialized) attention. softmax: (b, a, s, s) probabilities; when p > 0, mask (u8) and
// dropped (the probabilities after dropout) of the same shape, else both may be empty views.
void eager_attention_forward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                             const view& dropped, const attention_dropout& drop, const view& out);
// d_scores: (b, a, s, s) scratch; d_qkv is overwritten.
void eager_attention_backward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                              const view& dropped, const attention_dropout& drop, const view& d_out,
                              const view& d_scores, const view& d_qkv);

// Flash-style attention (Dao et al. 2022): keys in tiles with an online softmax; keeps only the output
// and the fp32 log-sum-exp per row, lse: (b, a, s).
void flash_attention_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                             const view& lse);
// Recomputes the probabilities tile by tile from lse (FlashAttention-2, Alg. 2). delta: (b, a, s) fp32
// scratch for rowsum(d_out * out); d_qkv is overwritten.
void flash_attention_backward(const attention_shape& sh, const view& qkv, const view& out, const view& lse,
                              const attention_dropout& drop, const view& d_out, const view& delta, const view& d_qkv);

// Rotary position embedding (Su et al. 2021) in the Hugging Face "rotate_half" layout on the q and k parts
// of qkv, in place: x' = x * cos + rotate_half(x) * sin, theta 10000. inverse applies the transpose
// (the backward of the rotation).
void rope_apply(const attention_shape& sh, const view& qkv, bool inverse);

}  // namespace trainplan::kernels
