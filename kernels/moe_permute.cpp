// The CPU reference of the Mixture-of-Experts dispatch (moe_permute.hpp): the row map (expert by expert,
// tokens in order, a capacity's overflow dropped), the gather into that order and its scatter-add backward.
#include "kernels/moe_permute.hpp"

#include <algorithm>
#include <stdexcept>

namespace trainplan::kernels {

moe_row_map make_moe_row_map(const moe_dispatch& d, const view& indices) {
  const auto* chosen = static_cast<const std::int64_t*>(indices.data);
  moe_row_map map;
  map.row_of_choice.assign(d.tokens * d.top_k, -1);
  map.expert_first_row.assign(d.experts, 0);
  map.expert_rows.assign(d.experts, 0);
  std::vector<std::size_t> arrived(d.experts, 0);  // tokens that chose each expert
  for (std::size_t i = 0; i < d.tokens * d.top_k; ++i) {
    if (chosen[i] < 0 || static_cast<std::size_t>(chosen[i]) >= d.experts) throw std::logic_error("MoE: expert index out of range");
    ++arrived[static_cast<std::size_t>(chosen[i])];
  }
  std::size_t first = 0;
  for (std::size_t e = 0; e < d.experts; ++e) {
    map.expert_first_row[e] = first;
    map.expert_rows[e] = d.capacity == 0 ? arrived[e] : d.capacity;
    first += map.expert_rows[e];
  }
  std::vector<std::size_t> filled(d.experts, 0);
  for (std::size_t t = 0; t < d.tokens; ++t)  // token order decides who keeps a row under a capacity
    for (std::size_t j = 0; j < d.top_k; ++j) {
      const auto e = static_cast<std::size_t>(chosen[t * d.top_k + j]);
      if (d.capacity != 0 && filled[e] == d.capacity) continue;  // dropped
      map.row_of_choice[t * d.top_k + j] = static_cast<std::int64_t>(map.expert_first_row[e] + filled[e]++);
    }
  return map;
}

void moe_permute_forward(const moe_dispatch& d, const view& indices, const view& x, const view& out, std::size_t width) {
  const moe_row_map map = make_moe_row_map(d, indices);
  for (std::size_t i = 0; i < d.rows() * width; ++i) out.set(i, 0.0f);
  for (std::size_t t = 0; t < d.tokens; ++t)
    for (std::size_t j = 0; j < d.top_k; ++j) {
      const std::int64_t row = map.row_of_choice[t * d.top_k + j];
      if (row < 0) continue;
      for (std::size_t c = 0; c < width; ++c) out.set(static_cast<std::size_t>(row) * width + c, x.get(t * width + c));
    }
}

void moe_permute_backward(const moe_dispatch& d, const view& indices, const view& d_out, const view& d_x, std::size_t width) {
  const moe_row_map map = make_moe_row_map(d, indices);
  std::vector<float> acc(width);
  for (std::size_t t = 0; t < d.tokens; ++t) {
    sum_token_rows(d, map, d_out, nullptr, t, width, acc);
    for (std::size_t c = 0; c < width; ++c) d_x.add(t * width + c, acc[c]);
  }
}

void sum_token_rows(const moe_dispatch& d, const moe_row_map& map, const view& rows, const view* weights,
                    std::size_t t, std::size_t width, std::vector<float>& acc) {
  std::fill(acc.begin(), acc.end(), 0.0f);
  for (std::size_t j = 0; j < d.top_k; ++j) {
    const std::int64_t row = map.row_of_choice[t * d.top_k + j];
    if (row < 0) continue;
    const float w = weights ? weights->get(t * d.top_k + j) : 1.0f;
    for (std::size_t c = 0; c < width; ++c) acc[c] += w * rows.get(static_cast<std::size_t>(row) * width + c);
  }
}

}  // namespace trainplan::kernels
