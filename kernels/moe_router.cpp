// The CPU reference of the Mixture-of-Experts router (moe_router.hpp): softmax over the experts, top-k by
// repeated arg-max, the renormalised weights, and the backward through both.
#include "kernels/moe_router.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace trainplan::kernels {

void moe_router_forward(const view& logits, const view& probs, const view& indices, const view& weights, std::size_t tokens,
                        std::size_t experts, std::size_t top_k) {
  std::vector<float> p(experts);  // one token's row: registers on a GPU
  std::vector<bool> taken(experts);
  auto* index_out = static_cast<std::int64_t*>(indices.data);
  for (std::size_t t = 0; t < tokens; ++t) {
    float max_logit = -INFINITY;
    for (std::size_t e = 0; e < experts; ++e) max_logit = std::max(max_logit, p[e] = logits.get(t * experts + e));
    float sum = 0;
    for (std::size_t e = 0; e < experts; ++e) sum += p[e] = std::exp(p[e] - max_logit);
    for (std::size_t e = 0; e < experts; ++e) probs.set(t * experts + e, p[e] /= sum);
    // Top-k by repeated arg-max: k is small (2 here, 8 for DeepSeek-V3).
    std::fill(taken.begin(), taken.end(), false);
    float chosen_sum = 0;
    for (std::size_t j = 0; j < top_k; ++j) {
      std::size_t best = experts;
      for (std::size_t e = 0; e < experts; ++e)
        if (!taken[e] && (best == experts || p[e] > p[best])) best = e;
      taken[best] = true;
      index_out[t * top_k + j] = static_cast<std::int64_t>(best);
      chosen_sum += p[best];
    }
    for (std::size_t j = 0; j < top_k; ++j)
      weights.set(t * top_k + j, p[static_cast<std::size_t>(index_out[t * top_k + j])] / chosen_sum);
  }
}

void moe_router_backward(const view& probs, const view& indices, const view& d_weights, const view& d_logits,
                         std::size_t tokens, std::size_t experts, std::size_t top_k) {
  std::vector<float> p(experts), d_p(experts), g(top_k);
  const auto* index_in = static_cast<const std::int64_t*>(indices.data);
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t e = 0; e < experts; ++e) p[e] = probs.get(t * experts + e);
    float chosen_sum = 0;
    for (std::size_t j = 0; j < top_k; ++j) {
      chosen_sum += p[static_cast<std::size_t>(index_in[t * top_k + j])];
      g[j] = d_weights.get(t * top_k + j);
    }
    // sum_l g_l w_l, with w_l = p_il / S as the forward computed it
    float g_dot_w = 0;
    for (std::size_t j = 0; j < top_k; ++j) g_dot_w += g[j] * (p[static_cast<std::size_t>(index_in[t * top_k + j])] / chosen_sum);
    std::fill(d_p.begin(), d_p.end(), 0.0f);
    for (std::size_t j = 0; j < top_k; ++j) d_p[static_cast<std::size_t>(index_in[t * top_k + j])] = (g[j] - g_dot_w) / chosen_sum;
    float d_p_dot_p = 0;
    for (std::size_t e = 0; e < experts; ++e) d_p_dot_p += d_p[e] * p[e];
    for (std::size_t e = 0; e < experts; ++e) d_logits.set(t * experts + e, p[e] * (d_p[e] - d_p_dot_p));
  }
}

}  // namespace trainplan::kernels
