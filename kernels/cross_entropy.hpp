#pragma once
// Softmax cross-entropy over (rows, vocab) logits, fused with its gradient (as llm.c's fused classifier).
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

// d_logits may be the logits themselves (llm.c's fused classifier writes the gradient in place): each
// element is read before it is written. Adds each row's loss to token_losses (fp32, rows): the caller sums a step's micro-batches there and
// reads them once, so the step never waits for the device. d_logits = (softmax(logits) - onehot(target))
// * grad_scale, where the caller folds the mean over tokens, 1/accumulation and the loss scale into
// grad_scale.
// Rows are padded_vocab wide (llm.c's padded vocabulary, planner/model/param_count.hpp vocab_rows): only the first
// `vocab` columns are classes; the others are never read and get zero gradient (llm.c's fused_classifier).
void cross_entropy_forward_backward(const view& logits, const view& targets, const view& d_logits,
                                    const view& token_losses, std::size_t rows, std::size_t vocab,
                                    std::size_t padded_vocab, float grad_scale);

}  // namespace trainplan::kernels
