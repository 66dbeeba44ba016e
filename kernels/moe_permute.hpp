#pragma once
// Mixture-of-Experts dispatch: which row of the experts' input each (token, choice) takes, and the gather
// of token rows into that order (the "permutation") with its backward, a scatter-add.
//
// Order: expert by expert; within an expert, tokens in ascending order (a token picks an expert at most
// once). Dropless, expert e's rows are exactly the tokens that chose it. With a capacity, every expert has
// `capacity` rows: the first `capacity` tokens that chose it in token order keep their row (Megatron-Core's
// moe_token_drop_policy "position"; Fedus et al. 2022, Switch Transformers, Sec. 2.2), later ones are
// dropped (that expert adds nothing to them), and rows no token fills are zeros (padding).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/view.hpp"

namespace trainplan::kernels {

struct moe_dispatch {
  std::size_t tokens = 0, experts = 0, top_k = 0;
  std::size_t capacity = 0;  // rows per expert; 0: dropless
  std::size_t rows() const { return capacity == 0 ? tokens * top_k : experts * capacity; }
};

struct moe_row_map {
  std::vector<std::int64_t> row_of_choice;  // (tokens, top_k): the expert row of each choice, -1 when dropped
  std::vector<std::size_t> expert_first_row, expert_rows;  // (experts): each expert's rows, padding included
};

// indices (tokens, top_k) i64 in memory the host can read.
moe_row_map make_moe_row_map(const moe_dispatch& d, const view& indices);

// acc (width) = the sum over token t's kept choices of its expert rows in `rows` (rows, width), each scaled
// by its weight in `weights` (tokens, top_k) when given: the combine's forward and the permutation's backward.
void sum_token_rows(const moe_dispatch& d, const moe_row_map& map, const view& rows, const view* weights,
                    std::size_t t, std::size_t width, std::vector<float>& acc);

// out (rows, width) = x's token rows in expert order; padding rows are zero.
void moe_permute_forward(const moe_dispatch& d, const view& indices, const view& x, const view& out, std::size_t width);

// d_x (tokens, width) += the rows of d_out (rows, width) each token sent (dropped choices and padding add
// nothing). Each token's sum is formed in fp32 and added once.
void moe_permute_backward(const moe_dispatch& d, const view& indices, const view& d_out, const view& d_x, std::size_t width);

}  // namespace trainplan::kernels
