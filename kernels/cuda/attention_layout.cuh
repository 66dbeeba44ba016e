#pragma once
// The packed attention layouts both attention files index (kernels/attention.hpp): qkv (b, s, (a + 2kv) d),
// the output (b, s, a d), the (b, a, s, s) probabilities and the (b, a, s) per-row values; and one score
// q_i . k_j, computed element by element, for the simple kernels.
#include <cmath>
#include <stdexcept>

#include "kernels/attention.hpp"
#include "kernels/cuda/common.cuh"

namespace trainplan::kernels::cuda::attention_detail {

struct layout {
  std::size_t batch, seq, heads, kv_heads, d;
  __device__ std::size_t qkv_width() const { return (heads + 2 * kv_heads) * d; }
  __device__ std::size_t q(std::size_t b, std::size_t t, std::size_t h, std::size_t e) const {
    return (b * seq + t) * qkv_width() + h * d + e;
  }
  __device__ std::size_t k(std::size_t b, std::size_t t, std::size_t kvh, std::size_t e) const {
    return (b * seq + t) * qkv_width() + (heads + kvh) * d + e;
  }
  __device__ std::size_t v(std::size_t b, std::size_t t, std::size_t kvh, std::size_t e) const {
    return (b * seq + t) * qkv_width() + (heads + kv_heads + kvh) * d + e;
  }
  __device__ std::size_t o(std::size_t b, std::size_t t, std::size_t h, std::size_t e) const {
    return (b * seq + t) * heads * d + h * d + e;
  }
  __device__ std::size_t p(std::size_t b, std::size_t h, std::size_t i, std::size_t j) const {
    return ((b * heads + h) * seq + i) * seq + j;
  }
  __device__ std::size_t row(std::size_t b, std::size_t h, std::size_t i) const { return (b * heads + h) * seq + i; }
  __device__ std::size_t group() const { return heads / kv_heads; }
};

// The simple kernels keep per-thread arrays of head_dim floats: at most this many.
constexpr std::size_t simple_kernels_max_head_dim = 256;

inline layout make_layout(const attention_shape& sh, const char* who) {
  if (sh.head_dim > simple_kernels_max_head_dim)
    throw std::runtime_error(std::string(who) + ": head_dim above 256 is not supported");
  return {sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.head_dim};
}

inline float scale_of(const attention_shape& sh) { return 1.0f / std::sqrt(static_cast<float>(sh.head_dim)); }

__device__ inline float score(const layout& L, dview qkv, std::size_t b, std::size_t h, std::size_t i, std::size_t j,
                              float scale) {
  float dot = 0;
  for (std::size_t e = 0; e < L.d; ++e) dot += qkv.get(L.q(b, i, h, e)) * qkv.get(L.k(b, j, h / L.group(), e));
  return dot * scale;
}

}  // namespace trainplan::kernels::cuda::attention_detail
