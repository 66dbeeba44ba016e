// The CPU reference of the fused softmax cross-entropy (cross_entropy.hpp): each row's loss and its gradient
// in one pass over the logits, sums in double, the gradient written over the logits when asked.
#include "kernels/cross_entropy.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace trainplan::kernels {

void cross_entropy_forward_backward(const view& logits, const view& targets, const view& d_logits,
                                    const view& token_losses, std::size_t rows, std::size_t vocab,
                                    std::size_t padded_vocab, float grad_scale) {
  if (padded_vocab < vocab)
    throw std::invalid_argument("cross entropy: rows of " + std::to_string(padded_vocab) + " logits cannot hold " +
                                std::to_string(vocab) + " classes");
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t base = r * padded_vocab;
    float max_logit = -std::numeric_limits<float>::infinity();
    for (std::size_t v = 0; v < vocab; ++v) max_logit = std::max(max_logit, logits.get(base + v));
    double sum = 0;
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits.get(base + v)) - max_logit);
    const double log_sum = std::log(sum) + max_logit;
    const std::int32_t id = targets.get_i32(r);
    if (id < 0 || static_cast<std::size_t>(id) >= vocab)  // would read past the row: refused, never clamped
      throw std::invalid_argument("cross entropy: target id " + std::to_string(id) + " at row " + std::to_string(r) +
                                  " is outside the vocabulary of " + std::to_string(vocab));
    const auto target = static_cast<std::size_t>(id);
    token_losses.add(r, static_cast<float>(log_sum - logits.get(base + target)));
    for (std::size_t v = 0; v < vocab; ++v) {
      const double prob = std::exp(static_cast<double>(logits.get(base + v)) - log_sum);
      d_logits.set(base + v, static_cast<float>((prob - (v == target ? 1.0 : 0.0)) * grad_scale));
    }
    for (std::size_t v = vocab; v < padded_vocab; ++v) d_logits.set(base + v, 0.0f);  // padding: not a class
  }
}

}  // namespace trainplan::kernels
