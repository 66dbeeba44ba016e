#pragma once
// Mixture-of-Experts combine ("unpermute"): each token's output is the sum over its top-k choices of the
// router weight times that expert's output row (Shazeer et al. 2017, Eq. 1; Mixtral, Eq. 1). A dropped
// choice (capacity exceeded, kernels/moe_permute.hpp) contributes nothing.
#include <cstddef>

#include "kernels/moe_permute.hpp"
#include "kernels/view.hpp"

namespace trainplan::kernels {

// y (tokens, width) = sum_j weights[t, j] * expert_out[row(t, j)], summed in fp32 and stored once.
void moe_combine_forward(const moe_dispatch& d, const view& indices, const view& weights, const view& expert_out,
                         const view& y, std::size_t width);

// d_expert_out[row(t, j)] = weights[t, j] * dy[t] (padding rows 0); d_weights[t, j] = <dy[t], expert_out[row(t, j)]>
// (0 when dropped). d_weights may be the same buffer as weights: each token's weights are read first.
void moe_combine_backward(const moe_dispatch& d, const view& indices, const view& weights, const view& expert_out,
                          const view& dy, const view& d_expert_out, const view& d_weights, std::size_t width);

}  // namespace trainplan::kernels
