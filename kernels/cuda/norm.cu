// LayerNorm and RMSNorm over rows, one thread block per row. As on the CPU, the backward recomputes the
// row statistics from the input. Weight and bias gradients are summed over rows in fp32 scratch and
// added to their stored values once.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"
#include "kernels/norm.hpp"

namespace trainplan::kernels::cuda {
namespace {

constexpr unsigned threads = 256;

__device__ void row_stats(dview x, std::size_t row, std::size_t width, bool center, float& mean, float& rstd) {
  float sum = 0;
  for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) sum += x.get(row * width + i);
  mean = center ? block_sum(sum) / width : 0.0f;
  float sq = 0;
  for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float d = x.get(row * width + i) - mean;
    sq += d * d;
  }
  rstd = rsqrtf(block_sum(sq) / width + norm_epsilon);
}

__global__ void norm_forward_kernel(dview x, dview w, dview b, bool has_bias, dview y, std::size_t width, bool center) {
  const std::size_t row = blockIdx.x;
  float mean, rstd;
  row_stats(x, row, width, center, mean, rstd);
  for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) {
    float v = (x.get(row * width + i) - mean) * rstd * w.get(i);
    if (has_bias) v += b.get(i);
    y.set(row * width + i, v);
  }
}

__global__ void norm_backward_kernel(dview x, dview w, dview dy, dview dx, float* dw, float* db, std::size_t width,
                                     bool center) {
  const std::size_t row = blockIdx.x;
  float mean, rstd;
  row_stats(x, row, width, center, mean, rstd);
  float s_dxhat = 0, s_dxhat_xhat = 0;
  for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float xhat = (x.get(row * width + i) - mean) * rstd;
    const float dxhat = dy.get(row * width + i) * w.get(i);
    s_dxhat += dxhat;
    s_dxhat_xhat += dxhat * xhat;
  }
  const float mean_dxhat = center ? block_sum(s_dxhat) / width : 0.0f;
  const float mean_dxhat_xhat = block_sum(s_dxhat_xhat) / width;
  for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float g = dy.get(row * width + i);
    const float xhat = (x.get(row * width + i) - mean) * rstd;
    const float dxhat = g * w.get(i);
    dx.set(row * width + i, dx.get(row * width + i) + rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
    atomicAdd(&dw[i], g * xhat);
    if (db) atomicAdd(&db[i], g);
  }
}

__global__ void add_scratch_kernel(dview target, const float* scratch, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) target.set(i, target.get(i) + scratch[i]);
}

void backward(const view& x, const view& w, const view& dy, const view& dx, const view& d_weight, const view* d_bias,
              std::size_t rows, std::size_t width, bool center) {
  float* scratch = static_cast<float*>(device_alloc(2 * width * sizeof(float)));  // kernel scratch, not a tensor
  TRAINPLAN_CUDA_CHECK(cudaMemset(scratch, 0, 2 * width * sizeof(float)));
  norm_backward_kernel<<<static_cast<unsigned>(rows), threads>>>(device(x), device(w), device(dy), device(dx), scratch,
                                                                 d_bias ? scratch + width : nullptr, width, center);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  add_scratch_kernel<<<blocks_for(width, 256), 256>>>(device(d_weight), scratch, width);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  if (d_bias) {
    add_scratch_kernel<<<blocks_for(width, 256), 256>>>(device(*d_bias), scratch + width, width);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
  }
  device_free(scratch);
}

}  // namespace

void layer_norm_forward(const view& x, const view& weight, const view& bias, const view& y, std::size_t rows,
                        std::size_t width) {
  norm_forward_kernel<<<static_cast<unsigned>(rows), threads>>>(device(x), device(weight), device(bias), true, device(y),
                                                                width, true);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void layer_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                         const view& d_bias, std::size_t rows, std::size_t width) {
  backward(x, weight, dy, dx, d_weight, &d_bias, rows, width, true);
}

void rms_norm_forward(const view& x, const view& weight, const view& y, std::size_t rows, std::size_t width) {
  norm_forward_kernel<<<static_cast<unsigned>(rows), threads>>>(device(x), device(weight), dview{nullptr, dtype::fp32},
                                                                false, device(y), width, false);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void rms_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                       std::size_t rows, std::size_t width) {
  backward(x, weight, dy, dx, d_weight, nullptr, rows, width, false);
}

}  // namespace trainplan::kernels::cuda
