#pragma once
// The Mixture-of-Experts router after its GEMM: softmax over the experts in fp32, the top-k experts of
// each token, and their probabilities renormalised to sum to 1 (Mixtral: Jiang et al. 2024, Sec. 2.1;
// Hugging Face MixtralSparseMoeBlock: softmax, topk, divide by the sum). The backward flows through the
// renormalisation and the softmax; the discrete choice of experts has no gradient.
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

// logits (T, E) -> probs (T, E) fp32 (probs may be logits: in place); indices (T, k) i64, the experts in
// descending probability, ties to the lower expert index (as torch.topk on CPU); weights (T, k) fp32.
void moe_router_forward(const view& logits, const view& probs, const view& indices, const view& weights, std::size_t tokens,
                        std::size_t experts, std::size_t top_k);

// d_weights (T, k) -> d_logits (T, E). The renormalised weights are recomputed from probs and indices
// (w_j = p_ij / S, S = sum_j p_ij), so d_weights may overwrite the weights and d_logits the probs.
// dL/dp_ij = (g_j - sum_l g_l w_l) / S for the chosen experts, 0 for the others; then the softmax's
// dL/dz = p * (dL/dp - <dL/dp, p>).
void moe_router_backward(const view& probs, const view& indices, const view& d_weights, const view& d_logits,
                         std::size_t tokens, std::size_t experts, std::size_t top_k);

}  // namespace trainplan::kernels
