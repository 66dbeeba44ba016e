// The CPU reference of the Mixture-of-Experts combine (moe_combine.hpp): each token's router-weighted sum of
// its experts' rows, and its backward to the expert rows and the router weights.
#include "kernels/moe_combine.hpp"

#include <algorithm>
#include <vector>

namespace trainplan::kernels {

void moe_combine_forward(const moe_dispatch& d, const view& indices, const view& weights, const view& expert_out,
                         const view& y, std::size_t width) {
  const moe_row_map map = make_moe_row_map(d, indices);
  std::vector<float> acc(width);
  for (std::size_t t = 0; t < d.tokens; ++t) {
    sum_token_rows(d, map, expert_out, &weights, t, width, acc);
    for (std::size_t c = 0; c < width; ++c) y.set(t * width + c, acc[c]);
  }
}

void moe_combine_backward(const moe_dispatch& d, const view& indices, const view& weights, const view& expert_out,
                          const view& dy, const view& d_expert_out, const view& d_weights, std::size_t width) {
  const moe_row_map map = make_moe_row_map(d, indices);
  for (std::size_t i = 0; i < d.rows() * width; ++i) d_expert_out.set(i, 0.0f);  // padding rows stay 0
  std::vector<float> w(d.top_k);
  for (std::size_t t = 0; t < d.tokens; ++t) {
    for (std::size_t j = 0; j < d.top_k; ++j) w[j] = weights.get(t * d.top_k + j);
    for (std::size_t j = 0; j < d.top_k; ++j) {
      const std::int64_t row = map.row_of_choice[t * d.top_k + j];
      float d_w = 0;
      if (row >= 0) {
        const std::size_t r = static_cast<std::size_t>(row) * width;
        for (std::size_t c = 0; c < width; ++c) {
          const float g = dy.get(t * width + c);
          d_w += g * expert_out.get(r + c);
          d_expert_out.set(r + c, w[j] * g);
        }
      }
      d_weights.set(t * d.top_k + j, d_w);
    }
  }
}

}  // namespace trainplan::kernels
