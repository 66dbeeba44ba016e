// LayerNorm and RMSNorm over rows: one warp per row for rows of one float type whose width is a multiple
// of 8, else (and the fused residual + norm always) one thread block per row in the forward and per group
// of rows in the backward. As on the CPU, the backward recomputes the row statistics from the input. Weight and bias
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

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A row's mean (0 without centering) and 1 / sqrt(variance + eps) over one warp, in the CPU's two passes
// (the mean, then the squared deviations), x read in packs of 8 by lane-strided columns.
template <class T>
__device__ void warp_row_stats(const T* xr, std::size_t width, unsigned lane, bool center, float& mean, float& rstd) {
  constexpr std::size_t step = 32 * pack_elements;  // columns a warp covers per pass
  float v[pack_elements];
  float sum = 0;
  for (std::size_t c = lane * pack_elements; c < width; c += step) {
    load_floats<pack_elements>(xr, c, v);
    for (int k = 0; k < pack_elements; ++k) sum += v[k];
  }
  mean = center ? warp_sum(sum) / width : 0.0f;
  float sq = 0;
  for (std::size_t c = lane * pack_elements; c < width; c += step) {
    load_floats<pack_elements>(xr, c, v);
    for (int k = 0; k < pack_elements; ++k) sq += (v[k] - mean) * (v[k] - mean);
  }
  rstd = rsqrtf(warp_sum(sq) / width + norm_epsilon);
}

// The forward with one warp per row (8 rows a block), for x and y of one float type and a width that is a
// multiple of 8 with aligned rows: the sums by warp shuffles, no block barrier; x read in packs of 8 three
// times (mean, variance: the CPU's two-pass statistics; then the output), from L1 after the first.
template <class T>
__global__ void __launch_bounds__(threads)
    norm_forward_warp_kernel(const T* x, dview w, dview b, bool has_bias, T* y, std::size_t width, std::size_t rows,
                             bool center) {
  const std::size_t row = static_cast<std::size_t>(blockIdx.x) * (threads / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave together
  const unsigned lane = threadIdx.x % 32;
  constexpr std::size_t step = 32 * pack_elements;
  const T* xr = x + row * width;
  float v[pack_elements];
  float mean, rstd;
  warp_row_stats(xr, width, lane, center, mean, rstd);
  for (std::size_t c = lane * pack_elements; c < width; c += step) {
    load_floats<pack_elements>(xr, c, v);
    for (int k = 0; k < pack_elements; ++k) {
      v[k] = (v[k] - mean) * rstd * w.get(c + k);
      if (has_bias) v[k] += b.get(c + k);
    }
    store_floats<pack_elements>(y + row * width, c, v);
  }
}

// Launches the warp forward when x and y share a float type, the width is a multiple of the pack and both
// are pack-aligned; returns whether it did.
bool launch_warp_forward(const view& x, const view& w, const view& b, bool has_bias, const view& y, std::size_t rows,
                         std::size_t width, bool center) {
  if (x.type != y.type || width % pack_elements != 0) return false;
  return with_float_type(x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data);
    T* yp = static_cast<T*>(y.data);
    if (!all_pack_aligned(xp, static_cast<const T*>(yp))) return false;
    const std::size_t rows_per_block = threads / 32;
    norm_forward_warp_kernel<T><<<static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block), threads>>>(
        xp, device(w), device(b), has_bias, yp, width, rows, center);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
    return true;
  });
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

// The same sums with one warp per row (llm.c's layernorm_backward_kernel10 arrangement): the row's sums by
// warp shuffles, with no block barrier per row; x, dy and dx moved in packs of 8 (width a multiple of 8,
// pointers aligned: backward() checks); the 8 warps of a block take its chunk's rows in turn. A lane's
// columns are the same in every row, so with PACKS > 0 (the packs a lane covers, width <= PACKS * 256) it
// keeps its weight (and bias) gradient sums in registers across its rows and adds them into the block's
// fp32 sums in shared memory once at the end; with PACKS = 0 (wider rows) it adds every element there
// (shared-memory atomics: the warps share columns, and the stride of 8 floats between lanes is an 8-way
// bank conflict). With the partials' sum below, the register sums took GPT-2's LayerNorm backward from
// 0.293 to 0.169 ms on the H100 (reports/h100-2026-11-26-2; the two were not timed apart). The block's sums
// are written to its partials row once. Three reads of each row of x (mean, variance, then the sums and the
// update: the CPU reference's two-pass statistics) hit L1 after the first.
template <class T, int PACKS, bool BIAS>
__global__ void __launch_bounds__(threads)
    norm_backward_warp_kernel(const T* x, dview w, const T* dy, T* dx, float* partials, std::size_t sums, std::size_t width,
                              std::size_t rows, std::size_t chunk, bool center) {
  extern __shared__ float block_sums[];  // `sums` floats: d_weight's width, then d_bias's
  for (std::size_t i = threadIdx.x; i < sums; i += blockDim.x) block_sums[i] = 0.0f;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const std::size_t first = blockIdx.x * chunk, last = first + chunk < rows ? first + chunk : rows;
  constexpr std::size_t step = 32 * pack_elements;  // columns a warp covers per pass
  constexpr int kept = PACKS > 0 ? PACKS * pack_elements : 1;
  float sum_w[kept] = {}, sum_b[BIAS ? kept : 1] = {};  // this lane's columns, over its rows (PACKS > 0)
  for (std::size_t row = first + warp; row < last; row += warps) {
    const T* xr = x + row * width;
    const T* gr = dy + row * width;
    T* dxr = dx + row * width;
    float v[pack_elements], g[pack_elements], d[pack_elements];
    float mean, rstd;
    warp_row_stats(xr, width, lane, center, mean, rstd);
    float s_dxhat = 0, s_dxhat_xhat = 0;
    for (std::size_t c = lane * pack_elements; c < width; c += step) {
      load_floats<pack_elements>(xr, c, v);
      load_floats<pack_elements>(gr, c, g);
      for (int k = 0; k < pack_elements; ++k) {
        const float dxhat = g[k] * w.get(c + k);
        s_dxhat += dxhat;
        s_dxhat_xhat += dxhat * (v[k] - mean) * rstd;
      }
    }
    const float mean_dxhat = center ? warp_sum(s_dxhat) / width : 0.0f;
    const float mean_dxhat_xhat = warp_sum(s_dxhat_xhat) / width;
    // dx for the pack at column c; the weight (and bias) gradient terms go to `add(k, dweight, dbias)`.
    auto update_pack = [&](std::size_t c, auto add) {
      load_floats<pack_elements>(xr, c, v);
      load_floats<pack_elements>(gr, c, g);
      load_floats<pack_elements>(dxr, c, d);
      for (int k = 0; k < pack_elements; ++k) {
        const float xhat = (v[k] - mean) * rstd, dxhat = g[k] * w.get(c + k);
        d[k] += rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
        add(k, g[k] * xhat, g[k]);
      }
      store_floats<pack_elements>(dxr, c, d);
    };
    if constexpr (PACKS > 0) {
#pragma unroll
      for (int p = 0; p < PACKS; ++p) {  // unrolled, so the register sums are indexed by constants
        const std::size_t c = lane * pack_elements + p * step;
        if (c < width)
          update_pack(c, [&](int k, float dweight, float dbias) {
            sum_w[p * pack_elements + k] += dweight;
            if constexpr (BIAS) sum_b[p * pack_elements + k] += dbias;
          });
      }
    } else {
      for (std::size_t c = lane * pack_elements; c < width; c += step)
        update_pack(c, [&](int k, float dweight, float dbias) {
          atomicAdd(&block_sums[c + k], dweight);
          if constexpr (BIAS) atomicAdd(&block_sums[width + c + k], dbias);
        });
    }
  }
  if constexpr (PACKS > 0) {
#pragma unroll
    for (int p = 0; p < PACKS; ++p) {
      const std::size_t c = lane * pack_elements + p * step;
      if (c >= width) continue;
      for (int k = 0; k < pack_elements; ++k) {
        atomicAdd(&block_sums[c + k], sum_w[p * pack_elements + k]);
        if constexpr (BIAS) atomicAdd(&block_sums[width + c + k], sum_b[p * pack_elements + k]);
      }
    }
  }
  __syncthreads();
  for (std::size_t i = threadIdx.x; i < sums; i += blockDim.x) partials[blockIdx.x * sums + i] = block_sums[i];
}

// The warp kernel's block sums live in shared memory: up to the default 48 KB (a width of 6,144 with a bias,
// 12,288 without); wider rows take the block kernel.
constexpr std::size_t warp_kernel_max_smem = 48 * 1024;

// Launches the warp kernel when x, dy and dx share a float type, the width is a multiple of the pack and
// every row start is pack-aligned; returns whether it did. Register sums for rows up to 4 packs a lane
// (1,024 columns: GPT-2's 768), or 8 without a bias (2,048: TinyLlama's RMSNorm), at most 64 floats a lane.
bool launch_warp_backward(const view& x, const view& w, const view& dy, const view& dx, float* scratch, std::size_t sums,
                          std::size_t width, std::size_t rows, std::size_t chunk, std::size_t blocks, bool center,
                          bool has_bias) {
  if (x.type != dy.type || x.type != dx.type || width % pack_elements != 0 || sums * sizeof(float) > warp_kernel_max_smem)
    return false;
  return with_float_type(x.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data);
    const T* gp = static_cast<const T*>(dy.data);
    T* dp = static_cast<T*>(dx.data);
    if (!all_pack_aligned(xp, gp, static_cast<const T*>(dp))) return false;
    const std::size_t packs = (width + 32 * pack_elements - 1) / (32 * pack_elements);  // a lane's
    auto launch = [&](auto kernel) {
      kernel<<<static_cast<unsigned>(blocks), threads, sums * sizeof(float)>>>(xp, device(w), gp, dp, scratch, sums, width,
                                                                               rows, chunk, center);
      TRAINPLAN_CUDA_LAUNCH_CHECK();
    };
    if (packs <= 4 && has_bias) launch(norm_backward_warp_kernel<T, 4, true>);
    else if (packs <= 4) launch(norm_backward_warp_kernel<T, 4, false>);
    else if (packs <= 8 && !has_bias) launch(norm_backward_warp_kernel<T, 8, false>);
    else if (has_bias) launch(norm_backward_warp_kernel<T, 0, true>);
    else launch(norm_backward_warp_kernel<T, 0, false>);
    return true;
  });
}

// Column i of the used partial rows, summed and added to the stored gradient once. A block takes 32 columns,
// one a lane, so every read of a partials row is coalesced; its 32 warps split the rows, and their 32 sums
// of a column are added in shared memory. (One thread a column over all rows, as before, left 1,536 threads
// walking 1,024 rows each for GPT-2: a latency-bound chain of 1,024 loads a thread.)
constexpr unsigned partials_sum_warps = 32;
__global__ void __launch_bounds__(32 * partials_sum_warps)
    norm_partials_sum_kernel(const float* partials, std::size_t blocks, std::size_t sums, std::size_t width,
                             dview d_weight, dview d_bias) {
  __shared__ float warp_sums[partials_sum_warps][33];  // 33: the column reads of the final sum hit distinct banks
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(32) + threadIdx.x;
  float acc = 0;
  if (i < sums)
    for (std::size_t p = threadIdx.y; p < blocks; p += partials_sum_warps) acc += partials[p * sums + i];
  warp_sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || i >= sums) return;
  float total = 0;
  for (unsigned y = 0; y < partials_sum_warps; ++y) total += warp_sums[y][threadIdx.x];
  if (i < width) d_weight.set(i, d_weight.get(i) + total);
  else d_bias.set(i - width, d_bias.get(i - width) + total);
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
  if (!launch_warp_backward(x, w, dy, dx, scratch, sums, width, rows, chunk, blocks, center, d_bias != nullptr)) {
    norm_backward_kernel<<<static_cast<unsigned>(blocks), threads>>>(device(x), device(w), device(dy), device(dx), scratch,
                                                                     sums, width, rows, chunk, center, d_bias != nullptr);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
  }
  norm_partials_sum_kernel<<<static_cast<unsigned>((sums + 31) / 32), dim3(32, partials_sum_warps)>>>(
      scratch, blocks, sums, width, device(d_weight), d_bias ? device(*d_bias) : dview{nullptr, dtype::fp32});
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace

void layer_norm_forward(const view& x, const view& weight, const view& bias, const view& y, std::size_t rows,
                        std::size_t width) {
  if (rows == 0 || launch_warp_forward(x, weight, bias, true, y, rows, width, true)) return;
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
  if (rows == 0 || launch_warp_forward(x, weight, view{}, false, y, rows, width, false)) return;
  norm_forward_kernel<<<static_cast<unsigned>(rows), threads>>>(device(x), device(weight), dview{nullptr, dtype::fp32},
                                                                false, device(y), width, false);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void rms_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                       const view& partials, std::size_t rows, std::size_t width) {
  backward(x, weight, dy, dx, d_weight, nullptr, partials, rows, width, false);
}

}  // namespace trainplan::kernels::cuda
