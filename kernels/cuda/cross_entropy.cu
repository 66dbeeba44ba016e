// Softmax cross-entropy fused with its gradient, one thread block per row (llm.c's fused classifier).
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

__global__ void cross_entropy_kernel(dview logits, dview targets, dview d_logits, float* row_loss, std::size_t vocab,
                                     float grad_scale) {
  const std::size_t row = blockIdx.x, base = row * vocab;
  float m = -INFINITY;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) m = fmaxf(m, logits.get(base + v));
  m = block_max(m);
  float s = 0;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) s += expf(logits.get(base + v) - m);
  const float log_sum = logf(block_sum(s)) + m;
  const auto target = static_cast<std::size_t>(targets.get_i32(row));
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float prob = expf(logits.get(base + v) - log_sum);
    d_logits.set(base + v, (prob - (v == target ? 1.0f : 0.0f)) * grad_scale);
  }
  if (threadIdx.x == 0) row_loss[row] = log_sum - logits.get(base + target);
}

}  // namespace

double cross_entropy_forward_backward(const view& logits, const view& targets, const view& d_logits, std::size_t rows,
                                      std::size_t vocab, float grad_scale) {
  float* row_loss = static_cast<float*>(device_alloc(rows * sizeof(float)));
  cross_entropy_kernel<<<static_cast<unsigned>(rows), 256>>>(device(logits), device(targets), device(d_logits), row_loss,
                                                             vocab, grad_scale);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  std::vector<float> host(rows);
  copy_to_host(host.data(), row_loss, rows * sizeof(float));
  device_free(row_loss);
  double total = 0;
  for (float l : host) total += l;
  return total;
}

}  // namespace trainplan::kernels::cuda
