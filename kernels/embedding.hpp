#pragma once
// Token (and learned position) embeddings: x[b, t] = wte[token[b, t]] + wpe[t].
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

// positions may have no data (RoPE models). The epilogue is applied by the caller (dropout).
void embedding_forward(const view& tokens, const view& wte, const view& wpe, const view& out, std::size_t batch,
                       std::size_t seq, std::size_t width);
// d_wte[token] += d_out, d_wpe[t] += d_out, summed in the fp32 `scratch` (vocab * width, then seq * width
// when there are positions) and added to the stored gradients once, so a 16-bit gradient is rounded once.
void embedding_backward(const view& tokens, const view& d_out, const view& d_wte, const view& d_wpe, const view& scratch,
                        std::size_t batch, std::size_t seq, std::size_t width, std::size_t vocab);

}  // namespace trainplan::kernels
