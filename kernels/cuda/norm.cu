// LayerNorm and RMSNorm over rows: the forward one thread block per row, the backward one per group of
// rows. As on the CPU, the backward recomputes the row statistics from the input. Weight and bias
// gradients are summed per block in the caller's fp32 partials (a tracked buffer, bwd.norm_partials),
// then over blocks, and added to their stored values once: no allocation, no atomics.
#include <algorithm>
#include <stdexcept>

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

// The residual add of a whole row, stored rounded, then (after the block's barrier makes the row's stores
// visible to all its threads) the norm of the stored values: residual_dropout then the norm, in one pass.
__global__ void residual_norm_forward_kernel(dview residual, dview mask, bool has_mask, float keep_scale, dview sum, dview w,
                                             dview b, bool has_bias, dview y, std::size_t width) {
  const std::size_t row = blockIdx.x;
  for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) {
    const std::size_t at = row * width + i;
    float v = sum.get(at);
    if (has_mask) v = mask.get(at) != 0.0f ? v * keep_scale : 0.0f;
    sum.set(at, residual.get(at) + v);
  }
  __syncthreads();
  float mean, rstd;
  row_stats(sum, row, width, has_bias, mean, rstd);
  for (std::size_t i = threadIdx.x; i < width; i += blockDim.x) {
    float v = (sum.get(row * width + i) - mean) * rstd * w.get(i);
    if (has_bias) v += b.get(i);
    y.set(row * width + i, v);
  }
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

// Block p takes rows [p * chunk, (p + 1) * chunk) and sums their weight (and bias) gradients into its own
// fp32 row of `partials` (d_weight's width sums, then d_bias's); thread t owns columns t, t + blockDim...
// of that row, so no two threads write one address and nothing is atomic.
__global__ void norm_backward_kernel(dview x, dview w, dview dy, dview dx, float* partials, std::size_t sums,
                                     std::size_t width, std::size_t rows, std::size_t chunk, bool center, bool has_bias) {
  const std::size_t first = blockIdx.x * chunk, last = first + chunk < rows ? first + chunk : rows;
  float* mine = partials + blockIdx.x * sums;
  for (std::size_t i = threadIdx.x; i < sums; i += blockDim.x) mine[i] = 0.0f;
  for (std::size_t row = first; row < last; ++row) {
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
      mine[i] += g * xhat;
      if (has_bias) mine[width + i] += g;
    }
  }
}

// Column i of the used partial rows, summed and added to the stored gradient once.
__global__ void norm_partials_sum_kernel(const float* partials, std::size_t blocks, std::size_t sums, std::size_t width,
                                         dview d_weight, dview d_bias) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= sums) return;
  float acc = 0;
  for (std::size_t p = 0; p < blocks; ++p) acc += partials[p * sums + i];
  if (i < width) d_weight.set(i, d_weight.get(i) + acc);
  else d_bias.set(i - width, d_bias.get(i - width) + acc);
}

void backward(const view& x, const view& w, const view& dy, const view& dx, const view& d_weight, const view* d_bias,
              const view& partials, std::size_t rows, std::size_t width, bool center) {
  const std::size_t sums = d_bias ? 2 * width : width;
  if (partials.type != dtype::fp32 || partials.size < sums)
    throw std::invalid_argument("norm backward: partials must be fp32 with at least one row of the gradients' width");
  if (rows == 0 || width == 0) return;  // nothing to normalise (and no chunk size to divide by)
  const std::size_t capacity = partials.size / sums;
  const std::size_t chunk = (rows + std::min(capacity, rows) - 1) / std::min(capacity, rows);
  const std::size_t blocks = (rows + chunk - 1) / chunk;  // <= capacity: every used row is zeroed first
  float* scratch = static_cast<float*>(partials.data);
  norm_backward_kernel<<<static_cast<unsigned>(blocks), threads>>>(device(x), device(w), device(dy), device(dx), scratch,
                                                                   sums, width, rows, chunk, center, d_bias != nullptr);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  norm_partials_sum_kernel<<<blocks_for(sums, 256), 256>>>(scratch, blocks, sums, width, device(d_weight),
                                                           d_bias ? device(*d_bias) : dview{nullptr, dtype::fp32});
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace

void layer_norm_forward(const view& x, const view& weight, const view& bias, const view& y, std::size_t rows,
                        std::size_t width) {
  if (rows == 0) return;
  norm_forward_kernel<<<static_cast<unsigned>(rows), threads>>>(device(x), device(weight), device(bias), true, device(y),
                                                                width, true);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void layer_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                         const view& d_bias, const view& partials, std::size_t rows, std::size_t width) {
  backward(x, weight, dy, dx, d_weight, &d_bias, partials, rows, width, true);
}

void residual_norm_forward(const view& residual, const view* mask, float keep_scale, const view& sum, const view& weight,
                           const view* bias, const view& out, std::size_t rows, std::size_t width) {
  if (rows == 0) return;
  const dview none{nullptr, dtype::fp32};
  residual_norm_forward_kernel<<<static_cast<unsigned>(rows), threads>>>(
      device(residual), mask ? device(*mask) : none, mask != nullptr, keep_scale, device(sum), device(weight),
      bias ? device(*bias) : none, bias != nullptr, device(out), width);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void rms_norm_forward(const view& x, const view& weight, const view& y, std::size_t rows, std::size_t width) {
  if (rows == 0) return;
  norm_forward_kernel<<<static_cast<unsigned>(rows), threads>>>(device(x), device(weight), dview{nullptr, dtype::fp32},
                                                                false, device(y), width, false);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void rms_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                       const view& partials, std::size_t rows, std::size_t width) {
  backward(x, weight, dy, dx, d_weight, nullptr, partials, rows, width, false);
}

}  // namespace trainplan::kernels::cuda
