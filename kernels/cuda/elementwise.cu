// The pointwise ops of kernels/elementwise.hpp on the GPU.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

__global__ void residual_dropout_kernel(dview residual, dview mask, bool has_mask, float keep_scale, dview y, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float v = y.get(i);
  if (has_mask) v = mask.get(i) != 0.0f ? v * keep_scale : 0.0f;
  y.set(i, residual.get(i) + v);
}

__global__ void dropout_apply_kernel(dview in, dview mask, bool has_mask, float keep_scale, dview out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out.set(i, has_mask ? (mask.get(i) != 0.0f ? in.get(i) * keep_scale : 0.0f) : in.get(i));
}

__global__ void convert_kernel(dview in, dview out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out.set(i, in.get(i));
}

__global__ void fill_kernel(dview out, float value, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out.set(i, value);
}

__global__ void accumulate_and_clear_kernel(dview dst, dview src, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  dst.set(i, dst.get(i) + src.get(i));
  src.set(i, 0.0f);
}

}  // namespace

void residual_dropout(const view& residual, const view* mask, float keep_scale, const view& y, std::size_t n) {
  residual_dropout_kernel<<<blocks_for(n, 256), 256>>>(device(residual), mask ? device(*mask) : dview{nullptr, dtype::u8},
                                                       mask != nullptr, keep_scale, device(y), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void dropout_apply(const view& in, const view* mask, float keep_scale, const view& out, std::size_t n) {
  dropout_apply_kernel<<<blocks_for(n, 256), 256>>>(device(in), mask ? device(*mask) : dview{nullptr, dtype::u8},
                                                    mask != nullptr, keep_scale, device(out), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void convert(const view& in, const view& out, std::size_t n) {
  convert_kernel<<<blocks_for(n, 256), 256>>>(device(in), device(out), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void fill(const view& out, float value, std::size_t n) {
  fill_kernel<<<blocks_for(n, 256), 256>>>(device(out), value, n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void accumulate_and_clear(const view& dst, const view& src, std::size_t n) {
  accumulate_and_clear_kernel<<<blocks_for(n, 256), 256>>>(device(dst), device(src), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace trainplan::kernels::cuda
