// Flash attention for fp32 qkv on the CUDA cores: the simple kernels' arithmetic (attention_flash.cu, one
// thread a row, the CPU reference's order of operations), with the row's vectors in registers and the other
// side's rows staged in shared memory a tile at a time, read by every thread of the block at once (a
// broadcast, no bank conflict). The simple kernels read every element through a dtype switch from global
// memory and kept head_dim floats a thread in local memory: GPT-2 in fp32 took 1.62 s a step on the H100,
// attention nearly all of it (reports/h100-2026-11-26-2/suite/gpt2-fp32.md). Written without a GPU: the
// CUDA kernel tests (tests/gpu, the fp32 flash cases) check it against the CPU reference.
//
// Forward and dQ: a block of 64 query rows of one (batch, head), key tiles of 32 rows. dK and dV (two
// kernels): a block of 64 key rows of one (batch, kv head), query tiles of 32 rows over the group's heads, in
// the reference's order (head by head, then query by query).
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_flash_simt.hpp"
#include "kernels/cuda/attention_layout.cuh"
#include "kernels/cuda/common.cuh"

namespace trainplan::kernels::cuda {
namespace {

using namespace attention_detail;

constexpr unsigned rows_per_block = 64;  // threads a block: one row each
constexpr unsigned tile_rows = 32;       // the other side's rows staged at a time

// Row t of a [seq, width] fp32 matrix at column offset `col`, for the batch `b`: qkv's q, k or v of one head.
__device__ inline const float* qkv_row(const float* qkv, const layout& L, std::size_t b, std::size_t t, std::size_t col) {
  return qkv + (b * L.seq + t) * L.qkv_width() + col;
}

// Stages rows [first, first + tile_rows) of one head's D columns (rows past seq as zeros) into tile.
template <int D>
__device__ inline void stage(float (*tile)[D], const float* base, std::size_t row_stride, std::size_t first,
                             std::size_t seq) {
  for (unsigned idx = threadIdx.x; idx < tile_rows * D; idx += blockDim.x) {
    const unsigned r = idx / D, c = idx % D;
    const std::size_t t = first + r;
    tile[r][c] = t < seq ? base[t * row_stride + c] : 0.0f;
  }
}

// What a forward or dQ block works on: 64 query rows of one (batch, head); this thread's row i (row: whether it
// is one, past the sequence's end otherwise); the last key any of the block's rows sees; the head's key and
// value columns, rows `stride` floats apart.
struct query_block {
  std::size_t b, h, i, last, stride;
  bool row;
  const float *k, *v;
  __device__ query_block(const layout& L, const float* qkv)
      : b(blockIdx.z), h(blockIdx.y), stride(L.qkv_width()) {
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * rows_per_block, kvh = h / L.group();
    i = first + threadIdx.x;
    row = i < L.seq;
    last = first + rows_per_block - 1 < L.seq ? first + rows_per_block - 1 : L.seq - 1;
    k = qkv + b * L.seq * stride + (L.heads + kvh) * L.d;
    v = qkv + b * L.seq * stride + (L.heads + L.kv_heads + kvh) * L.d;
  }
  __device__ std::size_t i_or_0() const { return row ? i : 0; }  // a row to read that exists
};

template <int D>
__device__ inline float dot(const float* a, const float* b) {
  float s = 0;
#pragma unroll
  for (int e = 0; e < D; ++e) s += a[e] * b[e];
  return s;
}

template <int D>
__global__ void __launch_bounds__(rows_per_block)
    flash_forward_simt_kernel(layout L, const float* qkv, attention_dropout drop, dview out, dview lse, float scale) {
  __shared__ float ks[tile_rows][D], vs[tile_rows][D];
  const query_block B(L, qkv);
  const std::size_t b = B.b, h = B.h, i = B.i;
  const bool row = B.row;
  float q[D], acc[D];
  const float* qi = qkv_row(qkv, L, b, B.i_or_0(), h * L.d);
#pragma unroll
  for (int e = 0; e < D; ++e) q[e] = qi[e], acc[e] = 0;
  float m = -INFINITY, s = 0;
  const float keep_scale = 1.0f / (1.0f - drop.p);
  for (std::size_t j0 = 0; j0 <= B.last; j0 += tile_rows) {  // the key tiles some row of the block attends to
    stage<D>(ks, B.k, B.stride, j0, L.seq);
    stage<D>(vs, B.v, B.stride, j0, L.seq);
    __syncthreads();
    for (unsigned jj = 0; jj < tile_rows; ++jj) {
      const std::size_t j = j0 + jj;
      if (!row || j > i) break;  // causal: the rest of the tile is masked for this row
      const float x = dot<D>(q, ks[jj]) * scale;
      const float m_new = fmaxf(m, x), correction = expf(m - m_new), p = expf(x - m_new);
      s = s * correction + p;
      const float pd = dropout_keep(drop.seed, drop.site, L.p(b, h, i, j), drop.p) ? (drop.p > 0 ? p * keep_scale : p) : 0.0f;
#pragma unroll
      for (int e = 0; e < D; ++e) acc[e] = acc[e] * correction + pd * vs[jj][e];
      m = m_new;
    }
    __syncthreads();  // before the next tile overwrites this one
  }
  if (!row) return;
#pragma unroll
  for (int e = 0; e < D; ++e) out.set(L.o(b, i, h, e), acc[e] / s);
  lse.set(L.row(b, h, i), m + logf(s));
}

// dS_ij and the dropped probability from the staged k and v rows (attention_flash.cu, flash_ds).
template <int D>
__device__ inline float simt_ds(const layout& L, const float* q, const float* dout, const float* k, const float* v, float lse_i,
                                float delta_i, const attention_dropout& drop, std::size_t b, std::size_t h, std::size_t i,
                                std::size_t j, float scale, float& pd) {
  const float p = expf(dot<D>(q, k) * scale - lse_i);
  const float dpd = dot<D>(dout, v);
  const bool keep = dropout_keep(drop.seed, drop.site, L.p(b, h, i, j), drop.p);
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;
  pd = keep ? p * keep_scale : 0.0f;
  const float dp = keep ? dpd * keep_scale : 0.0f;
  return p * (dp - delta_i) * scale;
}

template <int D>
__global__ void __launch_bounds__(rows_per_block)
    flash_dq_simt_kernel(layout L, const float* qkv, dview lse, dview delta, const float* d_out, attention_dropout drop,
                         dview d_qkv, float scale) {
  __shared__ float ks[tile_rows][D], vs[tile_rows][D];
  const query_block B(L, qkv);
  const std::size_t b = B.b, h = B.h, i = B.i, ii = B.i_or_0();
  const bool row = B.row;
  float q[D], dout[D], dq[D];
  const float* qi = qkv_row(qkv, L, b, ii, h * L.d);
  const float* oi = d_out + L.o(b, ii, h, 0);
#pragma unroll
  for (int e = 0; e < D; ++e) q[e] = qi[e], dout[e] = oi[e], dq[e] = 0;
  const float lse_i = lse.get(L.row(b, h, ii)), delta_i = delta.get(L.row(b, h, ii));
  for (std::size_t j0 = 0; j0 <= B.last; j0 += tile_rows) {
    stage<D>(ks, B.k, B.stride, j0, L.seq);
    stage<D>(vs, B.v, B.stride, j0, L.seq);
    __syncthreads();
    for (unsigned jj = 0; jj < tile_rows; ++jj) {
      const std::size_t j = j0 + jj;
      if (!row || j > i) break;
      float pd;
      const float ds = simt_ds<D>(L, q, dout, ks[jj], vs[jj], lse_i, delta_i, drop, b, h, i, j, scale, pd);
#pragma unroll
      for (int e = 0; e < D; ++e) dq[e] += ds * ks[jj][e];
    }
    __syncthreads();
  }
  if (!row) return;
#pragma unroll
  for (int e = 0; e < D; ++e) d_qkv.set(L.q(b, i, h, e), dq[e]);
}

// dV (WANT_DK false) or dK (true) for a block of key rows: two passes, each recomputing the probabilities, so
// that a thread holds at most three head_dim vectors (k and dV; or k, v and dK): with all four, ptxas spilled
// about 120 floats a thread at head_dim 64 inside the loop.
template <int D, bool WANT_DK>
__global__ void __launch_bounds__(rows_per_block)
    flash_dkv_simt_kernel(layout L, const float* qkv, dview lse, dview delta, const float* d_out, attention_dropout drop,
                          dview d_qkv, float scale) {
  __shared__ float qs[tile_rows][D], os[tile_rows][D];
  __shared__ float lses[tile_rows], deltas[tile_rows];
  const std::size_t b = blockIdx.z, kvh = blockIdx.y;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * rows_per_block, j = first + threadIdx.x;
  const bool row = j < L.seq;
  const std::size_t jj = row ? j : 0;
  const std::size_t stride = L.qkv_width(), out_stride = L.heads * L.d;
  float k[D], v[WANT_DK ? D : 1], grad[D];  // grad: dK or dV
  const float* kj = qkv_row(qkv, L, b, jj, (L.heads + kvh) * L.d);
  const float* vj = qkv_row(qkv, L, b, jj, (L.heads + L.kv_heads + kvh) * L.d);
#pragma unroll
  for (int e = 0; e < D; ++e) {
    k[e] = kj[e], grad[e] = 0;
    if constexpr (WANT_DK) v[e] = vj[e];
  }
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;
  const std::size_t first_tile = first / tile_rows * tile_rows;  // queries before the block's first key see none of it
  for (std::size_t h = kvh * L.group(); h < (kvh + 1) * L.group(); ++h) {
    const float* qbase = qkv + b * L.seq * stride + h * L.d;
    const float* obase = d_out + b * L.seq * out_stride + h * L.d;
    for (std::size_t i0 = first_tile; i0 < L.seq; i0 += tile_rows) {
      stage<D>(qs, qbase, stride, i0, L.seq);
      stage<D>(os, obase, out_stride, i0, L.seq);
      for (unsigned r = threadIdx.x; r < tile_rows; r += blockDim.x) {
        const std::size_t i = i0 + r;
        lses[r] = i < L.seq ? lse.get(L.row(b, h, i)) : 0.0f;
        deltas[r] = i < L.seq ? delta.get(L.row(b, h, i)) : 0.0f;
      }
      __syncthreads();
      for (unsigned r = 0; r < tile_rows; ++r) {
        const std::size_t i = i0 + r;
        if (!row || i >= L.seq) break;
        if (i < j) continue;  // causal: query i sees key j from i = j on
        if constexpr (WANT_DK) {
          float pd;
          const float ds = simt_ds<D>(L, qs[r], os[r], k, v, lses[r], deltas[r], drop, b, h, i, j, scale, pd);
#pragma unroll
          for (int e = 0; e < D; ++e) grad[e] += ds * qs[r][e];
        } else {  // pd as simt_ds computes it
          const float p = expf(dot<D>(qs[r], k) * scale - lses[r]);
          const float pd = dropout_keep(drop.seed, drop.site, L.p(b, h, i, j), drop.p) ? p * keep_scale : 0.0f;
#pragma unroll
          for (int e = 0; e < D; ++e) grad[e] += pd * os[r][e];
        }
      }
      __syncthreads();
    }
  }
  if (!row) return;
#pragma unroll
  for (int e = 0; e < D; ++e) {
    if constexpr (WANT_DK) d_qkv.set(L.k(b, j, kvh, e), grad[e]);
    else d_qkv.set(L.v(b, j, kvh, e), grad[e]);
  }
}

// Calls f with the head dim as a compile-time constant (simt_flash_usable checked it is one of these).
template <class F>
void with_head_dim(std::size_t d, F&& f) {
  switch (d) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 48: return f(std::integral_constant<int, 48>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 80: return f(std::integral_constant<int, 80>{});
    case 96: return f(std::integral_constant<int, 96>{});
    case 112: return f(std::integral_constant<int, 112>{});
    default: return f(std::integral_constant<int, 128>{});
  }
}

dim3 grid_of(std::size_t seq, std::size_t heads, std::size_t batch) {
  return dim3(static_cast<unsigned>((seq + rows_per_block - 1) / rows_per_block), static_cast<unsigned>(heads),
              static_cast<unsigned>(batch));
}

}  // namespace

bool simt_flash_usable(const attention_shape& sh, const view& qkv) {
  const std::size_t d = sh.head_dim;
  // A grid's y and z are at most 65,535; x at most 2^31 - 1.
  return qkv.type == dtype::fp32 && d >= 16 && d <= 128 && d % 16 == 0 && sh.kv_heads > 0 && sh.heads % sh.kv_heads == 0 &&
         sh.heads <= 65535 && sh.batch <= 65535 && (sh.seq + rows_per_block - 1) / rows_per_block <= 0x7fffffffu;
}

void simt_flash_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                        const view& lse) {
  const layout L = make_layout(sh, "flash attention");
  const float* q = static_cast<const float*>(qkv.data);
  with_head_dim(sh.head_dim, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    flash_forward_simt_kernel<D><<<grid_of(sh.seq, sh.heads, sh.batch), rows_per_block>>>(L, q, drop, device(out), device(lse),
                                                                                           scale_of(sh));
    TRAINPLAN_CUDA_LAUNCH_CHECK();
  });
}

void simt_flash_backward(const attention_shape& sh, const view& qkv, const view& lse, const attention_dropout& drop,
                         const view& d_out, const view& delta, const view& d_qkv) {
  const layout L = make_layout(sh, "flash attention");
  const float* q = static_cast<const float*>(qkv.data);
  const float* o = static_cast<const float*>(d_out.data);
  const float scale = scale_of(sh);
  with_head_dim(sh.head_dim, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    flash_dq_simt_kernel<D><<<grid_of(sh.seq, sh.heads, sh.batch), rows_per_block>>>(L, q, device(lse), device(delta), o, drop,
                                                                                      device(d_qkv), scale);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
    for (auto kernel : {flash_dkv_simt_kernel<D, true>, flash_dkv_simt_kernel<D, false>}) {
      kernel<<<grid_of(sh.seq, sh.kv_heads, sh.batch), rows_per_block>>>(L, q, device(lse), device(delta), o, drop,
                                                                         device(d_qkv), scale);
      TRAINPLAN_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace trainplan::kernels::cuda
