#pragma once
// Softmax cross-entropy over (rows, vocab) logits, fused with its gradient (as llm.c's fused classifier).
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

// Returns the summed loss over rows (fp64). d_logits = (softmax(logits) - onehot(target)) * grad_scale,
// where the caller folds the mean over tokens, 1/accumulation and the loss scale into grad_scale.
double cross_entropy_forward_backward(const view& logits, const view& targets, const view& d_logits, std::size_t rows,
                                      std::size_t vocab, float grad_scale);

}  // namespace trainplan::kernels
