// Flash attention with the scores in registers (FlashAttention-2, Dao 2023, Alg. 1 and 2, as its CUDA
// kernels arrange it): the tensor-core products are PTX mma.sync m16n8k16 with fp32 accumulators, and the
// accumulator fragment of S = Q K^T is, element for element, the A operand of the next product P V once
// rounded to the 16-bit type, so no score, probability or dS tile goes through shared memory. Shared
// memory holds only the 16-bit Q, K, V (and dO) tiles, loaded once per tile.
//
// The same tiles (64 query rows, 64 keys), warps (4, each owning 16 rows), causal tile skipping, dropout
// indices, rounding points and deterministic two-kernel backward as attention_flash_tiled.cu (the WMMA
// path, which stages every score tile in fp32 shared memory: 4-4.5% of the H100's bf16 peak on GPT-2's
// attention, reports/h100-2026-11-26/bench-kernels.txt).
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), for lane l,
// g = l / 4 and t = l % 4:
//   A (16 x 16, row):  a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]
//   B (16 x 8, col):   b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]
//   C (16 x 8, fp32):  c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]
// Two adjacent 8-column C tiles (columns 16k..16k+15) hold exactly a 16 x 16 A operand for k-step k:
// a0 = (c0, c1) and a1 = (c2, c3) of tile 2k, a2 and a3 the same of tile 2k+1.
// A B operand read from a row-major (k, n) matrix in shared memory (V, dO, Q or K as the right factor of a
// product over keys or queries) comes from ldmatrix .trans: lane l gives the address of row l % 16, and
// the transposed 8x8 load hands lane l the elements (rows 2t, 2t+1; column g) of each matrix: b0 and b1.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_flash_common.cuh"
#include "kernels/cuda/attention_flash_tiled.hpp"

namespace trainplan::kernels::cuda {
namespace {

using namespace flash_tiles;

constexpr int key_tiles8 = tile / 8;  // 8-key C tiles in a 64-key score strip
constexpr int k_steps = tile / 16;    // 16-key (or 16-query) k-steps of a product over a tile

template <int D> constexpr int row_elems = D + 8;  // 16-bit elements per shared-memory tile row: 16 B of padding
                                                   // keeps ldmatrix rows 16 B aligned and moves rows 4 banks apart
template <int D> constexpr std::size_t tile_bytes = std::size_t{tile} * row_elems<D> * 2;

// Two floats rounded to the 16-bit type, the first in the low half (the lower column of an A fragment).
template <class T> __device__ inline std::uint32_t pack2(float lo, float hi);
template <> __device__ inline std::uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
template <> __device__ inline std::uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// d += a . b, one m16n8k16 tensor-core product with fp32 accumulation.
template <class T> __device__ inline void mma16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]);
template <> __device__ inline void mma16816<__nv_bfloat16>(float (&d)[4], const std::uint32_t (&a)[4],
                                                           const std::uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ inline void mma16816<__half>(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two adjacent 16-bit elements of a shared-memory tile (even column: 4-byte aligned).
template <class T> __device__ inline std::uint32_t pair_at(const T* p) { return *reinterpret_cast<const std::uint32_t*>(p); }

// The A operand of k-step ks from rows [row0, row0 + 16) of a row-major (tile, D) shared-memory tile.
template <class T, int D>
__device__ inline void a_from_rows(std::uint32_t (&a)[4], const T* s, int row0, int ks, int g, int t) {
  const T* r0 = s + (row0 + g) * row_elems<D> + ks * 16 + 2 * t;
  const T* r8 = r0 + 8 * row_elems<D>;
  a[0] = pair_at(r0);
  a[1] = pair_at(r8);
  a[2] = pair_at(r0 + 8);
  a[3] = pair_at(r8 + 8);
}

// The B operand B[k][n] = X[n0 + n][16 ks + k] (X^T as the right factor): rows n0..n0+7 of a row-major
// (tile, D) tile, k along D.
template <class T, int D>
__device__ inline void b_from_rows(std::uint32_t (&b)[2], const T* s, int n0, int ks, int g, int t) {
  const T* r = s + (n0 + g) * row_elems<D> + ks * 16 + 2 * t;
  b[0] = pair_at(r);
  b[1] = pair_at(r + 8);
}

// The B operand B[k][n] = X[16 kk + k][8 dn + n] (X itself as the right factor, k over its rows) through
// ldmatrix.x2.trans: lanes 0-7 address rows 16kk..16kk+7 (b0), lanes 8-15 rows 16kk+8.. (b1); lanes 16-31
// repeat them (their addresses are not read for .x2 but stay valid).
template <class T, int D>
__device__ inline void b_from_columns(std::uint32_t (&b)[2], const T* s, int kk, int dn, int lane) {
  const T* row = s + (kk * 16 + (lane & 15)) * row_elems<D> + dn * 8;
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(b[0]), "=r"(b[1]) : "r"(address));
}

// The A operand of k-step kk from a warp's (16, 64) fp32 accumulator strip c[8][4], rounded to T.
template <class T>
__device__ inline void a_from_accumulators(std::uint32_t (&a)[4], const float (&c)[key_tiles8][4], int kk) {
  a[0] = pack2<T>(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack2<T>(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// Two (16, 64) products of a warp at once, x = A1 B1^T and y = A2 B2^T: A1, A2 rows [row0, row0 + 16) and
// B1, B2 all 64 rows of row-major (tile, D) shared-memory tiles, k along D (S and dP, or S^T and dP^T).
template <class T, int D>
__device__ inline void two_strip_products(float (&x)[key_tiles8][4], float (&y)[key_tiles8][4], const T* a1, const T* b1,
                                          const T* a2, const T* b2, int row0, int g, int t) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    std::uint32_t f1[4], f2[4];
    a_from_rows<T, D>(f1, a1, row0, ks, g, t);
    a_from_rows<T, D>(f2, a2, row0, ks, g, t);
#pragma unroll
    for (int nt = 0; nt < key_tiles8; ++nt) {
      std::uint32_t h1[2], h2[2];
      b_from_rows<T, D>(h1, b1, nt * 8, ks, g, t);
      b_from_rows<T, D>(h2, b2, nt * 8, ks, g, t);
      mma16816<T>(x[nt], f1, h1);
      mma16816<T>(y[nt], f2, h2);
    }
  }
}

// acc += C X for a warp: C its (16, 64) fp32 accumulator strip (rounded to T as the A operand), X a row-major
// (64, D) shared-memory tile (through ldmatrix.trans), acc a (16, D) accumulator: P V, P~^T dO, dS^T Q, dS K.
template <class T, int D>
__device__ inline void accumulate_strip_times_tile(float (&acc)[D / 8][4], const float (&c)[key_tiles8][4], const T* x,
                                                   int lane) {
#pragma unroll
  for (int kk = 0; kk < k_steps; ++kk) {
    std::uint32_t af[4];
    a_from_accumulators<T>(af, c, kk);
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      std::uint32_t bf[2];
      b_from_columns<T, D>(bf, x, kk, dn, lane);
      mma16816<T>(acc[dn], af, bf);
    }
  }
}

// The max (or sum) of a row over the four lanes t = 0..3 that hold it.
__device__ inline float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ inline float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Forward (Alg. 1) for one (query tile, head, batch) = (reversed blockIdx.x, blockIdx.y, blockIdx.z), the
// longest causal rows first. Lane (g, t) of warp w holds rows q0 + 16w + g and + 8 of S, P and O.
template <class T, int D>
__global__ void __launch_bounds__(tile_threads)
    flash_forward_mma_kernel(fast_layout L, dview qkv, attention_dropout drop, dview out, dview lse, float scale) {
  constexpr int ld = row_elems<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* const sq = reinterpret_cast<T*>(smem);
  T* const sk = sq + tile * ld;
  T* const sv = sk + tile * ld;

  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x), h = blockIdx.y, b = blockIdx.z, kvh = h / L.group;
  const int q0 = qt * tile, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::size_t seq0 = static_cast<std::size_t>(b) * L.seq * L.qkv_width;
  load_tile<T, D>(sq, ld, qkv, seq0 + q0 * L.qkv_width + static_cast<std::size_t>(h) * D, L.qkv_width, L.seq - q0, true);
  __syncthreads();
  std::uint32_t qf[D / 16][4];  // the warp's 16 query rows as A operands, for every key tile
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) a_from_rows<T, D>(qf[ks], sq, warp * 16, ks, g, t);

  const int rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  const std::size_t head_row0 = (static_cast<std::size_t>(b) * L.heads + h) * L.seq;  // (b, h, query 0)
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;
  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's part of the row sum

  for (int kt = 0; kt <= qt; ++kt) {  // B_r == B_c: key tiles past the diagonal are fully masked
    const int k0 = kt * tile;
    __syncthreads();  // every warp is done with the previous K and V
    load_key_tile<T, D>(sk, sv, ld, L, qkv, b, kvh, k0);
    __syncthreads();

    float s[key_tiles8][4] = {};  // S = Q K^T for the warp's rows, unscaled
#pragma unroll
    for (int nt = 0; nt < key_tiles8; ++nt)
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        std::uint32_t kf[2];
        b_from_rows<T, D>(kf, sk, nt * 8, ks, g, t);
        mma16816<T>(s[nt], qf[ks], kf);
      }

    // Online softmax (Milakov & Gimelshein 2018): masked keys (j > i, or past the sequence) are -inf.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < key_tiles8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = k0 + nt * 8 + 2 * t + (e & 1), i = rows[e / 2];
        const float x = j <= i && j < L.seq ? s[nt][e] * scale : -INFINITY;
        s[nt][e] = x;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
      }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m[r], quad_max(tile_max[r]));
      base[r] = m_new == -INFINITY ? 0.0f : m_new;
      const float correction = expf(m[r] - base[r]);  // 0 at the first tile (m = -inf)
      l[r] *= correction;
      m[r] = m_new;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        o[dn][2 * r] *= correction;
        o[dn][2 * r + 1] *= correction;
      }
    }
#pragma unroll
    for (int nt = 0; nt < key_tiles8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        float p = expf(s[nt][e] - base[r]);  // exp(-inf) = 0 for the masked keys
        l[r] += p;                           // the normaliser counts every probability, dropped or not
        if (drop.p > 0 && p > 0) {
          const int j = k0 + nt * 8 + 2 * t + (e & 1);
          p = dropout_keep(drop.seed, drop.site, (head_row0 + rows[r]) * L.seq + j, drop.p) ? p * keep_scale : 0.0f;
        }
        s[nt][e] = p;
      }

    accumulate_strip_times_tile<T, D>(o, s, sv, lane);  // O += P V: P from the registers
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = rows[r];
    const float sum = quad_sum(l[r]);
    if (i >= L.seq) continue;
    if (t == 0) lse.set(head_row0 + i, m[r] + logf(sum));
    const std::size_t first = (static_cast<std::size_t>(b) * L.seq + i) * L.out_width + static_cast<std::size_t>(h) * D;
    const float inv = 1.0f / sum;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      out.set(first + dn * 8 + 2 * t, o[dn][2 * r] * inv);
      out.set(first + dn * 8 + 2 * t + 1, o[dn][2 * r + 1] * inv);
    }
  }
}

// Backward (Alg. 2), the dK/dV half, for one (key tile, kv head, batch) = blockIdx: lane (g, t) of warp w
// holds keys k0 + 16w + g and + 8, summed over the group's query heads and every query tile at or after
// the key tile: dV += P~^T dO, dK += dS^T Q, with S^T = K Q^T and dP~^T = V dO^T computed key-major.
template <class T, int D>
__global__ void __launch_bounds__(tile_threads)
    flash_dkv_mma_kernel(fast_layout L, dview qkv, dview lse, dview delta, dview d_out, bool d_out_vector,
                         attention_dropout drop, dview d_qkv, float scale) {
  constexpr int ld = row_elems<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* const sk = reinterpret_cast<T*>(smem);
  T* const sv = sk + tile * ld;
  T* const sq = sv + tile * ld;
  T* const sdo = sq + tile * ld;
  float* const slse = reinterpret_cast<float*>(sdo + tile * ld);
  float* const sdelta = slse + tile;

  const int kt = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z, k0 = kt * tile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, n_tiles = (L.seq + tile - 1) / tile;
  const std::size_t seq0 = static_cast<std::size_t>(b) * L.seq * L.qkv_width;
  const std::size_t k_first = seq0 + k0 * L.qkv_width + static_cast<std::size_t>(L.heads + kvh) * D;
  const std::size_t v_first = seq0 + k0 * L.qkv_width + static_cast<std::size_t>(L.heads + L.kv_heads + kvh) * D;
  load_key_tile<T, D>(sk, sv, ld, L, qkv, b, kvh, k0);

  const int keys[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};

  for (int h = kvh * L.group; h < (kvh + 1) * L.group; ++h)
    for (int qt = kt; qt < n_tiles; ++qt) {  // B_r == B_c: earlier query tiles see none of these keys
      const int q0 = qt * tile;
      const std::size_t row0 = (static_cast<std::size_t>(b) * L.heads + h) * L.seq + q0;  // lse/delta index of q0
      __syncthreads();  // every warp is done with the previous Q, dO, lse and delta (and, at the start, K and V are written)
      load_query_tile<T, D>(sq, sdo, slse, sdelta, ld, L, qkv, d_out, d_out_vector, lse, delta, b, h, q0);
      __syncthreads();

      float st[key_tiles8][4] = {}, dpt[key_tiles8][4] = {};  // S^T = K Q^T and dP~^T = V dO^T: (16 keys, 64 queries)
      two_strip_products<T, D>(st, dpt, sk, sq, sv, sdo, warp * 16, g, t);

      // st becomes P~^T (dropped probabilities), dpt becomes dS^T.
#pragma unroll
      for (int nt = 0; nt < key_tiles8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = nt * 8 + 2 * t + (e & 1), i = q0 + c, j = keys[e / 2];
          float pd = 0.0f, ds = 0.0f;
          if (i >= j && i < L.seq) {  // causal (and so j < seq too)
            const float p = expf(st[nt][e] * scale - slse[c]);
            float dp = dpt[nt][e];
            pd = p;
            if (drop.p > 0) {
              const bool keep = dropout_keep(drop.seed, drop.site, (row0 + c) * L.seq + j, drop.p);
              pd = keep ? p * keep_scale : 0.0f;
              dp = keep ? dp * keep_scale : 0.0f;
            }
            ds = p * (dp - sdelta[c]) * scale;
          }
          st[nt][e] = pd;
          dpt[nt][e] = ds;
        }

      accumulate_strip_times_tile<T, D>(dv, st, sdo, lane);  // dV += P~^T dO
      accumulate_strip_times_tile<T, D>(dk, dpt, sq, lane);  // dK += dS^T Q
    }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (keys[r] >= L.seq) continue;
    const std::size_t at = static_cast<std::size_t>(keys[r] - k0) * L.qkv_width;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        d_qkv.set(k_first + at + dn * 8 + 2 * t + e, dk[dn][2 * r + e]);
        d_qkv.set(v_first + at + dn * 8 + 2 * t + e, dv[dn][2 * r + e]);
      }
  }
}

// Backward, the dQ half, for one (query tile, head, batch) = (reversed blockIdx.x, blockIdx.y, blockIdx.z):
// dQ += dS K over the key tiles up to the diagonal.
template <class T, int D>
__global__ void __launch_bounds__(tile_threads)
    flash_dq_mma_kernel(fast_layout L, dview qkv, dview lse, dview delta, dview d_out, bool d_out_vector,
                        attention_dropout drop, dview d_qkv, float scale) {
  constexpr int ld = row_elems<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* const sq = reinterpret_cast<T*>(smem);
  T* const sdo = sq + tile * ld;
  T* const sk = sdo + tile * ld;
  T* const sv = sk + tile * ld;

  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x), h = blockIdx.y, b = blockIdx.z, kvh = h / L.group;
  const int q0 = qt * tile, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::size_t seq0 = static_cast<std::size_t>(b) * L.seq * L.qkv_width;
  const std::size_t q_first = seq0 + q0 * L.qkv_width + static_cast<std::size_t>(h) * D;
  load_tile<T, D>(sq, ld, qkv, q_first, L.qkv_width, L.seq - q0, true);
  load_tile<T, D>(sdo, ld, d_out, (static_cast<std::size_t>(b) * L.seq + q0) * L.out_width + static_cast<std::size_t>(h) * D,
                  L.out_width, L.seq - q0, d_out_vector);

  const int rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  const std::size_t head_row0 = (static_cast<std::size_t>(b) * L.heads + h) * L.seq;
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_lse[r] = rows[r] < L.seq ? lse.get(head_row0 + rows[r]) : 0.0f;
    row_delta[r] = rows[r] < L.seq ? delta.get(head_row0 + rows[r]) : 0.0f;
  }
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;
  float dq[D / 8][4] = {};

  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * tile;
    __syncthreads();  // every warp is done with the previous K and V
    load_key_tile<T, D>(sk, sv, ld, L, qkv, b, kvh, k0);
    __syncthreads();  // K, V (and at kt = 0 Q and dO) visible to every warp

    float s[key_tiles8][4] = {}, dp[key_tiles8][4] = {};  // S = Q K^T and dP~ = dO V^T
    two_strip_products<T, D>(s, dp, sq, sk, sdo, sv, warp * 16, g, t);

#pragma unroll
    for (int nt = 0; nt < key_tiles8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, i = rows[r], j = k0 + nt * 8 + 2 * t + (e & 1);
        float ds = 0.0f;
        if (j <= i && i < L.seq) {
          const float p = expf(s[nt][e] * scale - row_lse[r]);
          float d = dp[nt][e];
          if (drop.p > 0) d = dropout_keep(drop.seed, drop.site, (head_row0 + i) * L.seq + j, drop.p) ? d * keep_scale : 0.0f;
          ds = p * (d - row_delta[r]) * scale;
        }
        s[nt][e] = ds;
      }

    accumulate_strip_times_tile<T, D>(dq, s, sk, lane);  // dQ += dS K
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= L.seq) continue;
    const std::size_t at = q_first + static_cast<std::size_t>(rows[r] - q0) * L.qkv_width;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      d_qkv.set(at + dn * 8 + 2 * t, dq[dn][2 * r]);
      d_qkv.set(at + dn * 8 + 2 * t + 1, dq[dn][2 * r + 1]);
    }
  }
}

template <int D> constexpr std::size_t forward_bytes = 3 * tile_bytes<D>;                                // Q, K, V
template <int D> constexpr std::size_t dkv_bytes = 4 * tile_bytes<D> + 2 * tile * sizeof(float);         // + lse, delta
template <int D> constexpr std::size_t dq_bytes = 4 * tile_bytes<D>;                                     // Q, dO, K, V

}  // namespace

void mma_flash_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                       const view& lse) {
  dispatch(qkv.type, sh.head_dim, [&](auto t, auto d) {
    using T = typename decltype(t)::type;
    constexpr int D = decltype(d)::value;
    launch_flash_forward<flash_forward_mma_kernel<T, D>, D>(forward_bytes<D>, sh, qkv, drop, out, lse);
  });
}

void mma_flash_backward(const attention_shape& sh, const view& qkv, const view& lse, const attention_dropout& drop,
                        const view& d_out, const view& delta, const view& d_qkv) {
  dispatch(qkv.type, sh.head_dim, [&](auto t, auto d) {
    using T = typename decltype(t)::type;
    constexpr int D = decltype(d)::value;
    launch_flash_backward<flash_dkv_mma_kernel<T, D>, flash_dq_mma_kernel<T, D>, T, D>(dkv_bytes<D>, dq_bytes<D>, sh, qkv, lse,
                                                                                     drop, d_out, delta, d_qkv);
  });
}

}  // namespace trainplan::kernels::cuda
