// Softmax cross-entropy fused with its gradient, one thread block per row (llm.c's fused classifier). The
// row losses are added into the caller's buffer on the device: nothing is read back inside the step. Target
// ids are checked on the host where they enter (validate/transformer.cpp), not here.
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

__global__ void cross_entropy_kernel(dview logits, dview targets, dview d_logits, float* token_losses, std::size_t vocab,
                                     std::size_t padded_vocab, float grad_scale) {
  const std::size_t row = blockIdx.x, base = row * padded_vocab;
  const auto target = static_cast<std::size_t>(targets.get_i32(row));
  // Read before the barriers below: once past them, another thread may write the gradient over it.
  const float target_logit = logits.get(base + target);
  float m = -INFINITY;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) m = fmaxf(m, logits.get(base + v));
  m = block_max(m);
  float s = 0;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) s += expf(logits.get(base + v) - m);
  const float log_sum = logf(block_sum(s)) + m;
  // Each thread reads its element, then writes its gradient there: d_logits may be the logits.
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float prob = expf(logits.get(base + v) - log_sum);
    d_logits.set(base + v, (prob - (v == target ? 1.0f : 0.0f)) * grad_scale);
  }
  // The padded columns (llm.c's padded vocabulary) are not classes: never read, zero gradient.
  for (std::size_t v = vocab + threadIdx.x; v < padded_vocab; v += blockDim.x) d_logits.set(base + v, 0.0f);
  if (threadIdx.x == 0) token_losses[row] += log_sum - target_logit;  // one thread per row: no race
}

}  // namespace

void cross_entropy_forward_backward(const view& logits, const view& targets, const view& d_logits,
                                    const view& token_losses, std::size_t rows, std::size_t vocab,
                                    std::size_t padded_vocab, float grad_scale) {
  if (token_losses.type != dtype::fp32 || token_losses.size < rows)
    throw std::invalid_argument("cross entropy: token_losses must be fp32 with one element per row");
  if (padded_vocab < vocab) throw std::invalid_argument("cross entropy: a padded row is narrower than the vocabulary");
  if (rows == 0) return;
  cross_entropy_kernel<<<static_cast<unsigned>(rows), 256>>>(device(logits), device(targets), device(d_logits),
                                                             static_cast<float*>(token_losses.data), vocab, padded_vocab,
                                                             grad_scale);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace trainplan::kernels::cuda
