// Causal GQA flash attention on the GPU, after FlashAttention-2 (Dao 2023, "FlashAttention-2: Faster
// Attention with Better Parallelism and Work Partitioning"): Alg. 1 (forward: an online softmax over key
// tiles, only O and the fp32 log-sum-exp written) and Alg. 2 (backward: D = rowsum(dO * O), then P and dP
// recomputed from lse and D). Layouts and dropout indices are those of kernels/attention_flash.cpp, the
// CPU reference.
//
// The public ops run the tensor-core kernels where they apply (attention_flash_mma.cu, or with
// set_flash_kernel(wmma) attention_flash_tiled.cu); fp32 qkv of those head dims runs the CUDA-core kernels of
// attention_flash_simt.cu; other head dims, misaligned views or too little shared memory run the simple
// kernels here (one thread per row, every element read from global memory), as before.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/attention_flash_simt.hpp"
#include "kernels/cuda/attention_flash_tiled.hpp"
#include "kernels/cuda/attention_layout.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

using namespace attention_detail;

// ---- fallback: one thread per row, any dtype, head_dim up to 256 ------------------------------------

__global__ void flash_forward_fallback_kernel(layout L, dview qkv, attention_dropout drop, dview out, dview lse, float scale,
                                              std::size_t rows) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const std::size_t i = r % L.seq, h = (r / L.seq) % L.heads, b = r / (L.seq * L.heads);
  float acc[simple_kernels_max_head_dim];
  for (std::size_t e = 0; e < L.d; ++e) acc[e] = 0;
  float m = -INFINITY, s = 0;
  const float keep_scale = 1.0f / (1.0f - drop.p);
  for (std::size_t j = 0; j <= i; ++j) {
    const float x = score(L, qkv, b, h, i, j, scale);
    const float m_new = fmaxf(m, x), correction = expf(m - m_new), p = expf(x - m_new);
    s = s * correction + p;
    const float pd = dropout_keep(drop.seed, drop.site, L.p(b, h, i, j), drop.p) ? (drop.p > 0 ? p * keep_scale : p) : 0.0f;
    for (std::size_t e = 0; e < L.d; ++e) acc[e] = acc[e] * correction + pd * qkv.get(L.v(b, j, h / L.group(), e));
    m = m_new;
  }
  for (std::size_t e = 0; e < L.d; ++e) out.set(L.o(b, i, h, e), acc[e] / s);
  lse.set(L.row(b, h, i), m + logf(s));
}

// dS_ij recomputed from lse and delta (FlashAttention-2, Alg. 2); also returns the dropped probability.
__device__ float flash_ds(const layout& L, dview qkv, dview lse, dview delta, dview d_out, const attention_dropout& drop,
                          std::size_t b, std::size_t h, std::size_t i, std::size_t j, float scale, float& pd) {
  const float p = expf(score(L, qkv, b, h, i, j, scale) - lse.get(L.row(b, h, i)));
  float dpd = 0;
  for (std::size_t e = 0; e < L.d; ++e) dpd += d_out.get(L.o(b, i, h, e)) * qkv.get(L.v(b, j, h / L.group(), e));
  const bool keep = dropout_keep(drop.seed, drop.site, L.p(b, h, i, j), drop.p);
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;
  pd = keep ? p * keep_scale : 0.0f;
  const float dp = keep ? dpd * keep_scale : 0.0f;
  return p * (dp - delta.get(L.row(b, h, i))) * scale;
}

__global__ void flash_dq_fallback_kernel(layout L, dview qkv, dview lse, dview delta, dview d_out, attention_dropout drop,
                                         dview d_qkv, float scale, std::size_t rows) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const std::size_t i = r % L.seq, h = (r / L.seq) % L.heads, b = r / (L.seq * L.heads);
  float dq[simple_kernels_max_head_dim];
  for (std::size_t e = 0; e < L.d; ++e) dq[e] = 0;
  for (std::size_t j = 0; j <= i; ++j) {
    float pd;
    const float ds = flash_ds(L, qkv, lse, delta, d_out, drop, b, h, i, j, scale, pd);
    for (std::size_t e = 0; e < L.d; ++e) dq[e] += ds * qkv.get(L.k(b, j, h / L.group(), e));
  }
  for (std::size_t e = 0; e < L.d; ++e) d_qkv.set(L.q(b, i, h, e), dq[e]);
}

__global__ void flash_dkv_fallback_kernel(layout L, dview qkv, dview lse, dview delta, dview d_out, attention_dropout drop,
                                          dview d_qkv, float scale, std::size_t n) {
  const std::size_t x = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (x >= n) return;
  const std::size_t kvh = x % L.kv_heads, j = (x / L.kv_heads) % L.seq, b = x / (L.kv_heads * L.seq);
  float dk[simple_kernels_max_head_dim], dv[simple_kernels_max_head_dim];
  for (std::size_t e = 0; e < L.d; ++e) dk[e] = dv[e] = 0;
  for (std::size_t h = kvh * L.group(); h < (kvh + 1) * L.group(); ++h)
    for (std::size_t i = j; i < L.seq; ++i) {
      float pd;
      const float ds = flash_ds(L, qkv, lse, delta, d_out, drop, b, h, i, j, scale, pd);
      for (std::size_t e = 0; e < L.d; ++e) {
        dk[e] += ds * qkv.get(L.q(b, i, h, e));
        dv[e] += pd * d_out.get(L.o(b, i, h, e));
      }
    }
  for (std::size_t e = 0; e < L.d; ++e) {
    d_qkv.set(L.k(b, j, kvh, e), dk[e]);
    d_qkv.set(L.v(b, j, kvh, e), dv[e]);
  }
}

// ---- both paths: delta_i = rowsum(dO_i * O_i), one warp per row -------------------------------------

// rows = b * a * s, row r = (b * a + h) * s + i; out and d_out (b, s, a * d) in any dtype; delta (b, a, s).
__global__ void flash_delta_kernel(std::size_t seq, std::size_t heads, std::size_t d, dview out, dview d_out, dview delta,
                                   std::size_t rows) {
  const std::size_t r = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  if (r >= rows) return;  // whole warps leave together: r is the same for the 32 lanes
  const std::size_t i = r % seq, h = (r / seq) % heads, b = r / (seq * heads);
  const std::size_t base = ((b * seq + i) * heads + h) * d;
  float dot = 0;
  for (std::size_t e = lane; e < d; e += 32) dot += d_out.get(base + e) * out.get(base + e);
  for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  if (lane == 0) delta.set(r, dot);
}


std::atomic<flash_kernel>& flash_kernel_setting() {
  static std::atomic<flash_kernel> setting{[] {
    const char* env = std::getenv("TRAINPLAN_FLASH_KERNEL");
    return env != nullptr && std::strcmp(env, "wmma") == 0 ? flash_kernel::wmma : flash_kernel::mma;
  }()};
  return setting;
}

}  // namespace

void set_flash_kernel(flash_kernel k) { flash_kernel_setting().store(k, std::memory_order_relaxed); }
flash_kernel selected_flash_kernel() { return flash_kernel_setting().load(std::memory_order_relaxed); }
const char* flash_kernel_name(flash_kernel k) { return k == flash_kernel::mma ? "mma" : "wmma"; }

void flash_attention_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                             const view& lse) {
  if (sh.batch * sh.seq * sh.heads == 0) return;
  if (tiled_flash_usable(sh, qkv)) {
    if (selected_flash_kernel() == flash_kernel::mma) return mma_flash_forward(sh, qkv, drop, out, lse);
    return tiled_flash_forward(sh, qkv, drop, out, lse);
  }
  if (simt_flash_usable(sh, qkv)) return simt_flash_forward(sh, qkv, drop, out, lse);
  const layout L = make_layout(sh, "flash attention");
  const std::size_t rows = sh.batch * sh.heads * sh.seq;
  flash_forward_fallback_kernel<<<blocks_for(rows, 64), 64>>>(L, device(qkv), drop, device(out), device(lse), scale_of(sh),
                                                              rows);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void flash_attention_backward(const attention_shape& sh, const view& qkv, const view& out, const view& lse,
                              const attention_dropout& drop, const view& d_out, const view& delta, const view& d_qkv) {
  if (sh.batch * sh.seq * sh.heads == 0) return;
  const std::size_t rows = sh.batch * sh.heads * sh.seq;
  flash_delta_kernel<<<blocks_for(rows * 32, 128), 128>>>(sh.seq, sh.heads, sh.head_dim, device(out), device(d_out),
                                                          device(delta), rows);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  if (tiled_flash_usable(sh, qkv)) {
    if (selected_flash_kernel() == flash_kernel::mma) return mma_flash_backward(sh, qkv, lse, drop, d_out, delta, d_qkv);
    return tiled_flash_backward(sh, qkv, lse, drop, d_out, delta, d_qkv);
  }
  if (simt_flash_usable(sh, qkv) && d_out.type == dtype::fp32)
    return simt_flash_backward(sh, qkv, lse, drop, d_out, delta, d_qkv);
  const layout L = make_layout(sh, "flash attention");
  const float scale = scale_of(sh);
  flash_dq_fallback_kernel<<<blocks_for(rows, 64), 64>>>(L, device(qkv), device(lse), device(delta), device(d_out), drop,
                                                         device(d_qkv), scale, rows);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  const std::size_t nkv = sh.batch * sh.seq * sh.kv_heads;
  flash_dkv_fallback_kernel<<<blocks_for(nkv, 64), 64>>>(L, device(qkv), device(lse), device(delta), device(d_out), drop,
                                                         device(d_qkv), scale, nkv);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace trainplan::kernels::cuda
