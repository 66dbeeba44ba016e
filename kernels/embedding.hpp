#pragma once
// Token (and learned position) embeddings: x[b, t] = wte[token[b, t]] + wpe[t].
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

// positions may have no data (RoPE models). The epilogue is applied by the caller (dropout).
void embedding_forward(const view& tokens, const view& wte, const view& wpe, const view& out, std::size_t batch,
                       std::size_t seq, std::size_t width);
// d_wte[token] += d_out, d_wpe[t] += d_out, summed in fp32 per row and stored once.
void embedding_backward(const view& tokens, const view& d_out, const view& d_wte, const view& d_wpe, std::size_t batch,
                        std::size_t seq, std::size_t width, std::size_t vocab);

}  // namespace trainplan::kernels
