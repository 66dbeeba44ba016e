// Pointwise kernels: GELU (tanh), SwiGLU, and dropout masks from the same hash as the CPU.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

constexpr float sqrt_2_over_pi = 0.7978845608028654f;
constexpr float gelu_cubic = 0.044715f;

__device__ float gelu(float x) { return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + gelu_cubic * x * x * x))); }
__device__ float gelu_derivative(float x) {
  const float t = tanhf(sqrt_2_over_pi * (x + gelu_cubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * sqrt_2_over_pi * (1.0f + 3.0f * gelu_cubic * x * x);
}
__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void gelu_forward_kernel(dview x, dview y, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y.set(i, gelu(x.get(i)));
}
__global__ void gelu_backward_kernel(dview x, dview dy, dview dx, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dx.set(i, dy.get(i) * gelu_derivative(x.get(i)));
}
__global__ void swiglu_forward_kernel(dview gate, dview up, dview y, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const float g = gate.get(i);
    y.set(i, g * sigmoid(g) * up.get(i));
  }
}
__global__ void swiglu_backward_kernel(dview gate, dview up, dview dy, dview d_gate, dview d_up, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate.get(i), u = up.get(i), d = dy.get(i), s = sigmoid(g);
  d_gate.set(i, d * u * s * (1.0f + g * (1.0f - s)));
  d_up.set(i, d * g * s);
}
__global__ void dropout_mask_kernel(std::uint64_t seed, std::uint64_t site, float p, dview mask, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) mask.set(i, dropout_keep(seed, site, i, p) ? 1.0f : 0.0f);
}

}  // namespace

void gelu_forward(const view& x, const view& y, std::size_t n) {
  gelu_forward_kernel<<<blocks_for(n, 256), 256>>>(device(x), device(y), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}
void gelu_backward(const view& x, const view& dy, const view& dx, std::size_t n) {
  gelu_backward_kernel<<<blocks_for(n, 256), 256>>>(device(x), device(dy), device(dx), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}
void swiglu_forward(const view& gate, const view& up, const view& y, std::size_t n) {
  swiglu_forward_kernel<<<blocks_for(n, 256), 256>>>(device(gate), device(up), device(y), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}
void swiglu_backward(const view& gate, const view& up, const view& dy, const view& d_gate, const view& d_up, std::size_t n) {
  swiglu_backward_kernel<<<blocks_for(n, 256), 256>>>(device(gate), device(up), device(dy), device(d_gate), device(d_up), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}
void dropout_mask(std::uint64_t seed, std::uint64_t site, float p, const view& mask, std::size_t n) {
  dropout_mask_kernel<<<blocks_for(n, 256), 256>>>(seed, site, p, device(mask), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace trainplan::kernels::cuda
