// Fused AdamW: one pass reads the gradient, updates m, v and the fp32 master copy, and writes the rounded
// low-precision weights. The loss-scale check is a reduction that flags any inf or NaN gradient.
#include <cmath>
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

__global__ void adamw_kernel(adamw_config cfg, float bias1, float bias2, dview params, dview grads, float grad_scale,
                             dview m, dview v, dview copy, bool has_copy, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = grads.get(i) * grad_scale;
  const float mi = cfg.beta1 * m.get(i) + (1.0f - cfg.beta1) * g;
  const float vi = cfg.beta2 * v.get(i) + (1.0f - cfg.beta2) * g * g;
  m.set(i, mi);
  v.set(i, vi);
  float p = params.get(i) * (1.0f - cfg.lr * cfg.weight_decay);
  p -= cfg.lr * (mi / bias1) / (sqrtf(vi / bias2) + cfg.eps);
  params.set(i, p);
  if (has_copy) copy.set(i, params.get(i));
}

__global__ void non_finite_kernel(dview grads, std::size_t n, int* flag) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n && !isfinite(grads.get(i))) atomicOr(flag, 1);
}

}  // namespace

void adamw_step(const adamw_config& cfg, int step, const view& params, const view& grads, float grad_scale, const view& m,
                const view& v, const view& low_precision_copy, std::size_t n) {
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta1), step));
  const float bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta2), step));
  adamw_kernel<<<blocks_for(n, 256), 256>>>(cfg, bias1, bias2, device(params), device(grads), grad_scale, device(m),
                                            device(v), device(low_precision_copy), low_precision_copy.data != nullptr, n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

// The one read-back of an fp16 step, before its optimizer update (GradScaler reads found_inf there too).
bool has_non_finite(const view& grads, const view& flag, std::size_t n) {
  if (flag.type != dtype::i32 || flag.size < 1) throw std::invalid_argument("has_non_finite: the flag is one i32");
  int* device_flag = static_cast<int*>(flag.data);
  TRAINPLAN_CUDA_CHECK(cudaMemsetAsync(device_flag, 0, sizeof(int), 0));
  non_finite_kernel<<<blocks_for(n, 256), 256>>>(device(grads), n, device_flag);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  int host = 0;
  copy_to_host(&host, device_flag, sizeof(int));
  return host != 0;
}

}  // namespace trainplan::kernels::cuda
