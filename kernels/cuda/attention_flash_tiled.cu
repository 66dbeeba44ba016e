// The tiled tensor-core path of flash attention (attention_flash.cu holds the public ops, the simple
// fallback kernels and the delta kernel both paths share), after FlashAttention-2 (Dao 2023, Alg. 1 and 2).
//
// bf16/fp16 qkv, head_dim a multiple of 16 up to 128. Tiles of 64 query rows and 64 keys in shared
// memory, four warps per block, each warp owning 16 rows of every tile; the products run on the tensor
// cores through nvcuda::wmma (16x16x16, fp32 accumulation); the softmax runs in fp32, the probabilities
// (and dS) are rounded to the 16-bit type before they enter a tensor-core product. Causal: key tiles past
// the query tile are never visited; the diagonal tile and the ragged last tile are masked per element.
// The backward is deterministic and needs no memory beyond `delta`: one kernel per (batch, kv head, key
// tile) sums dK and dV over the group's query heads and the query tiles at or after it, one kernel per
// (batch, head, query tile) sums dQ over the key tiles; each writes its part of d_qkv once (so P and dP
// are recomputed twice: the cost of determinism without scratch or atomics).
#include <mma.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/attention_flash_common.cuh"
#include "kernels/cuda/attention_flash_tiled.hpp"
#include "kernels/cuda/common.cuh"

namespace trainplan::kernels::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using namespace flash_tiles;

// ---- fast path: tiled, tensor cores ------------------------------------------------------------------

constexpr int wm = 16;                // WMMA m = n = k
constexpr int pad16 = 8;              // per row of a 16-bit tile: 16 B, so ldm stays a multiple of 8 and rows shift banks
constexpr int pad32 = 4;              // per row of an fp32 tile: 16 B
constexpr int ld_s = tile + pad32;    // (tile, tile) fp32 scores
constexpr int ld_p = tile + pad16;    // (tile, tile) 16-bit probabilities / dS
static_assert(tile == wm * tile_warps, "one 16-row WMMA strip per warp");

// Byte offsets of a block's shared-memory tiles; every offset and every 16-row strip is a multiple of
// 128 B, so each WMMA pointer is 256-bit aligned (ld16 * 2 * 16 = 32 (D + 8), ld_s * 4 * 16 = 4352).
template <int D> struct tiles {
  static constexpr int ld16 = D + pad16;                                            // (tile, D) 16-bit rows
  static constexpr int ld32 = D + pad32;                                            // (tile, D) fp32 rows
  static constexpr std::size_t t16 = std::size_t{tile} * ld16 * 2;                  // one (tile, D) 16-bit tile
  static constexpr std::size_t s32 = std::size_t{tile} * ld_s * 4;                  // one (tile, tile) fp32 tile
  static constexpr std::size_t p16 = std::size_t{tile} * ld_p * 2;                  // one (tile, tile) 16-bit tile
  static constexpr std::size_t o32 = std::size_t{tile} * ld32 * 4;                  // one (tile, D) fp32 tile
  static_assert(o32 <= 2 * s32, "the (tile, D) fp32 staging of dQ/dK/dV fits in the two score tiles");
};

// Forward: Q, K, V (tile, D) 16-bit; S (tile, tile) fp32; P (tile, tile) 16-bit; O (tile, D) fp32; 1/l (tile).
template <int D> struct forward_smem : tiles<D> {
  using b = tiles<D>;
  static constexpr std::size_t q = 0, k = q + b::t16, v = k + b::t16, s = v + b::t16, p = s + b::s32, o = p + b::p16,
                               inv_l = o + b::o32, bytes = inv_l + tile * 4;
};
// dK/dV: K, V, Q, dO (tile, D) 16-bit; S^T, dP^T (tile, tile) fp32; P~^T, dS^T (tile, tile) 16-bit; lse, delta (tile).
template <int D> struct dkv_smem : tiles<D> {
  using b = tiles<D>;
  static constexpr std::size_t k = 0, v = k + b::t16, q = v + b::t16, d_out = q + b::t16, s = d_out + b::t16,
                               dp = s + b::s32, pd = dp + b::s32, ds = pd + b::p16, lse = ds + b::p16,
                               delta = lse + tile * 4, bytes = delta + tile * 4;
};
// dQ: Q, dO, K, V (tile, D) 16-bit; S, dP (tile, tile) fp32; dS (tile, tile) 16-bit.
template <int D> struct dq_smem : tiles<D> {
  using b = tiles<D>;
  static constexpr std::size_t q = 0, d_out = q + b::t16, k = d_out + b::t16, v = k + b::t16, s = v + b::t16,
                               dp = s + b::s32, ds = dp + b::s32, bytes = ds + b::p16;
};

// A warp's (16, tile) strip of A . B^T with A (16, D) and B (tile, D) row-major 16-bit tiles (B read
// as col_major gives B^T), into an fp32 strip of ld_s.
template <class T, int D>
__device__ void strip_a_bt(const T* a, const T* b, int ld, float* dst) {
#pragma unroll
  for (int n = 0; n < tile / wm; ++n) {
    wmma::fragment<wmma::accumulator, wm, wm, wm, float> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < D / wm; ++k) {
      wmma::fragment<wmma::matrix_a, wm, wm, wm, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, wm, wm, wm, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, a + k * wm, ld);
      wmma::load_matrix_sync(fb, b + n * wm * ld + k * wm, ld);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(dst + n * wm, acc, ld_s, wmma::mem_row_major);
  }
}

// acc[n] += A . B[:, 16n:16n+16] for a warp's strip: A (16, tile) 16-bit of ld_p, B (tile, D) row-major.
template <class T, int D>
__device__ void strip_accumulate(wmma::fragment<wmma::accumulator, wm, wm, wm, float> (&acc)[D / wm], const T* a,
                                 const T* b, int ld) {
#pragma unroll
  for (int k = 0; k < tile / wm; ++k) {
    wmma::fragment<wmma::matrix_a, wm, wm, wm, T, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a + k * wm, ld_p);
#pragma unroll
    for (int n = 0; n < D / wm; ++n) {
      wmma::fragment<wmma::matrix_b, wm, wm, wm, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, b + k * wm * ld + n * wm, ld);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// A warp's 16 rows of accumulators, staged in fp32 shared memory (16, ld32), written to the rows
// [row0, row0 + 16) below `valid` of a (rows, D) slice at dst + first + r * stride, coalesced.
template <int D>
__device__ void store_strip(wmma::fragment<wmma::accumulator, wm, wm, wm, float> (&acc)[D / wm], float* stage, dview dst,
                            std::size_t first, std::size_t stride, int row0, int valid) {
  constexpr int ld = tiles<D>::ld32;
#pragma unroll
  for (int n = 0; n < D / wm; ++n) wmma::store_matrix_sync(stage + n * wm, acc[n], ld, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  for (int r = 0; r < wm && row0 + r < valid; ++r)
    for (int e = lane; e < D; e += 32) dst.set(first + (row0 + r) * stride + e, stage[r * ld + e]);
  __syncwarp();
}

// FlashAttention-2, Alg. 1, for one (query tile, head, batch) = (reversed blockIdx.x, blockIdx.y, blockIdx.z):
// the longest causal rows start first. qkv (b, s, (a + 2 kv) d); out (b, s, a d); lse (b, a, s) fp32.
template <class T, int D>
__global__ void __launch_bounds__(tile_threads)
    flash_forward_tiled_kernel(fast_layout L, dview qkv, attention_dropout drop, dview out, dview lse, float scale) {
  using sm = forward_smem<D>;
  constexpr int ld = sm::ld16, ld_o = sm::ld32;
  extern __shared__ __align__(128) unsigned char smem[];
  T* const sq = reinterpret_cast<T*>(smem + sm::q);
  T* const sk = reinterpret_cast<T*>(smem + sm::k);
  T* const sv = reinterpret_cast<T*>(smem + sm::v);
  float* const ss = reinterpret_cast<float*>(smem + sm::s);
  T* const sp = reinterpret_cast<T*>(smem + sm::p);
  float* const so = reinterpret_cast<float*>(smem + sm::o);
  float* const inv_l = reinterpret_cast<float*>(smem + sm::inv_l);

  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x), h = blockIdx.y, b = blockIdx.z, kvh = h / L.group;
  const int q0 = qt * tile, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::size_t seq0 = static_cast<std::size_t>(b) * L.seq * L.qkv_width;  // token 0 of this sequence in qkv
  load_tile<T, D>(sq, ld, qkv, seq0 + q0 * L.qkv_width + static_cast<std::size_t>(h) * D, L.qkv_width, L.seq - q0, true);
  for (int x = threadIdx.x; x < tile * ld_o; x += tile_threads) so[x] = 0.0f;

  // The softmax gives each row to a pair of lanes, each taking half of the tile's keys and half of D.
  const int r = warp * wm + lane / 2, half = lane % 2, i = q0 + r;
  const std::size_t row_flat = ((static_cast<std::size_t>(b) * L.heads + h) * L.seq + i) * L.seq;  // dropout index of (i, 0)
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;
  float m = -INFINITY, l = 0.0f;  // running max and sum of the undropped probabilities (identical in both lanes)

  for (int kt = 0; kt <= qt; ++kt) {  // B_r == B_c: key tiles past the diagonal are fully masked
    const int k0 = kt * tile;
    __syncthreads();  // every warp is done with the previous K and V
    load_key_tile<T, D>(sk, sv, ld, L, qkv, b, kvh, k0);
    __syncthreads();  // K, V (and at kt = 0 Q and the zeroed O) visible to every warp

    strip_a_bt<T, D>(sq + warp * wm * ld, sk, ld, ss + warp * wm * ld_s);  // S = Q K^T, unscaled
    __syncwarp();

    // Online softmax (Milakov & Gimelshein 2018) on row r: masked keys (j > i, or past the sequence) are
    // -inf, i.e. contribute 0. Every row of a visited tile has a key j <= i there, but guard anyway.
    const float* srow = ss + r * ld_s;
    T* prow = sp + r * ld_p;
    float tile_max = -INFINITY;
    for (int c = half * (tile / 2); c < (half + 1) * (tile / 2); ++c) {
      const int j = k0 + c;
      if (j <= i && j < L.seq) tile_max = fmaxf(tile_max, srow[c] * scale);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max), base = m_new == -INFINITY ? 0.0f : m_new;
    const float correction = expf(m - base);  // 0 at the first tile (m = -inf)
    float sum = 0.0f;
    for (int c = half * (tile / 2); c < (half + 1) * (tile / 2); ++c) {
      const int j = k0 + c;
      float pv = 0.0f;
      if (j <= i && j < L.seq) {
        pv = expf(srow[c] * scale - base);
        sum += pv;  // the normaliser counts every probability, dropped or not
        if (drop.p > 0) pv = dropout_keep(drop.seed, drop.site, row_flat + j, drop.p) ? pv * keep_scale : 0.0f;
      }
      prow[c] = to_half_type<T>(pv);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * correction + sum;
    m = m_new;
    float* orow = so + r * ld_o;
    for (int e = half * (D / 2); e < (half + 1) * (D / 2); ++e) orow[e] *= correction;
    __syncwarp();  // P and the rescaled O rows of this warp are written

    // O += P V for the warp's 16 rows: O goes through the accumulator fragments and back.
    wmma::fragment<wmma::accumulator, wm, wm, wm, float> acc[D / wm];
#pragma unroll
    for (int n = 0; n < D / wm; ++n)
      wmma::load_matrix_sync(acc[n], so + warp * wm * ld_o + n * wm, ld_o, wmma::mem_row_major);
    strip_accumulate<T, D>(acc, sp + warp * wm * ld_p, sv, ld);
#pragma unroll
    for (int n = 0; n < D / wm; ++n)
      wmma::store_matrix_sync(so + warp * wm * ld_o + n * wm, acc[n], ld_o, wmma::mem_row_major);
    __syncwarp();  // before the next tile's softmax rescales these rows
  }

  if (half == 0) {
    inv_l[r] = 1.0f / l;
    if (i < L.seq) lse.set((static_cast<std::size_t>(b) * L.heads + h) * L.seq + i, m + logf(l));
  }
  __syncwarp();
  for (int rr = 0; rr < wm; ++rr) {  // the warp's rows, one at a time, lanes along D
    const int row = warp * wm + rr;
    if (q0 + row >= L.seq) break;
    const std::size_t first = (static_cast<std::size_t>(b) * L.seq + q0 + row) * L.out_width + static_cast<std::size_t>(h) * D;
    for (int e = lane; e < D; e += 32) out.set(first + e, so[row * ld_o + e] * inv_l[row]);
  }
}

// FlashAttention-2, Alg. 2, the dK/dV half, for one (key tile, kv head, batch) = blockIdx: the warps own
// 16 keys each, and sum over the group's query heads and every query tile at or after the key tile:
// dV += P~^T dO, dK += dS^T Q with P~ the dropped probabilities and dS = P o (dP~ - delta) * scale.
template <class T, int D>
__global__ void __launch_bounds__(tile_threads)
    flash_dkv_tiled_kernel(fast_layout L, dview qkv, dview lse, dview delta, dview d_out, bool d_out_vector,
                           attention_dropout drop, dview d_qkv, float scale) {
  using sm = dkv_smem<D>;
  constexpr int ld = sm::ld16;
  extern __shared__ __align__(128) unsigned char smem[];
  T* const sk = reinterpret_cast<T*>(smem + sm::k);
  T* const sv = reinterpret_cast<T*>(smem + sm::v);
  T* const sq = reinterpret_cast<T*>(smem + sm::q);
  T* const sdo = reinterpret_cast<T*>(smem + sm::d_out);
  float* const sst = reinterpret_cast<float*>(smem + sm::s);    // S^T (keys, queries)
  float* const sdpt = reinterpret_cast<float*>(smem + sm::dp);  // dP^T (keys, queries), undropped
  T* const spdt = reinterpret_cast<T*>(smem + sm::pd);
  T* const sdst = reinterpret_cast<T*>(smem + sm::ds);
  float* const slse = reinterpret_cast<float*>(smem + sm::lse);
  float* const sdelta = reinterpret_cast<float*>(smem + sm::delta);

  const int kt = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z, k0 = kt * tile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_tiles = (L.seq + tile - 1) / tile;
  const std::size_t seq0 = static_cast<std::size_t>(b) * L.seq * L.qkv_width;
  const std::size_t k_first = seq0 + k0 * L.qkv_width + static_cast<std::size_t>(L.heads + kvh) * D;
  const std::size_t v_first = seq0 + k0 * L.qkv_width + static_cast<std::size_t>(L.heads + L.kv_heads + kvh) * D;
  load_key_tile<T, D>(sk, sv, ld, L, qkv, b, kvh, k0);

  wmma::fragment<wmma::accumulator, wm, wm, wm, float> dk[D / wm], dv[D / wm];
#pragma unroll
  for (int n = 0; n < D / wm; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }
  // The elementwise step gives each key row to a pair of lanes, each taking half of the tile's queries.
  const int r = warp * wm + lane / 2, half = lane % 2, j = k0 + r;
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;

  for (int h = kvh * L.group; h < (kvh + 1) * L.group; ++h)
    for (int qt = kt; qt < n_tiles; ++qt) {  // B_r == B_c: earlier query tiles see none of these keys
      const int q0 = qt * tile;
      const std::size_t row0 = (static_cast<std::size_t>(b) * L.heads + h) * L.seq + q0;  // lse/delta index of q0
      __syncthreads();  // every warp is done with the previous Q, dO, lse and delta
      load_query_tile<T, D>(sq, sdo, slse, sdelta, ld, L, qkv, d_out, d_out_vector, lse, delta, b, h, q0);
      __syncthreads();

      strip_a_bt<T, D>(sk + warp * wm * ld, sq, ld, sst + warp * wm * ld_s);    // S^T = K Q^T, unscaled
      strip_a_bt<T, D>(sv + warp * wm * ld, sdo, ld, sdpt + warp * wm * ld_s);  // dP^T = V dO^T
      __syncwarp();

      const float* srow = sst + r * ld_s;
      const float* dprow = sdpt + r * ld_s;
      T* pdrow = spdt + r * ld_p;
      T* dsrow = sdst + r * ld_p;
      const std::size_t col_flat = (row0 * L.seq) + j;  // dropout index of (q0, j); + c * seq for query q0 + c
      for (int c = half * (tile / 2); c < (half + 1) * (tile / 2); ++c) {
        const int i = q0 + c;
        float pd = 0.0f, ds = 0.0f;
        if (i >= j && i < L.seq) {  // causal (and so j < seq too)
          const float p = expf(srow[c] * scale - slse[c]);
          float dp = dprow[c];
          pd = p;
          if (drop.p > 0) {
            const bool keep = dropout_keep(drop.seed, drop.site, col_flat + static_cast<std::size_t>(c) * L.seq, drop.p);
            pd = keep ? p * keep_scale : 0.0f;
            dp = keep ? dp * keep_scale : 0.0f;
          }
          ds = p * (dp - sdelta[c]) * scale;
        }
        pdrow[c] = to_half_type<T>(pd);
        dsrow[c] = to_half_type<T>(ds);
      }
      __syncwarp();

      strip_accumulate<T, D>(dv, spdt + warp * wm * ld_p, sdo, ld);  // dV += P~^T dO
      strip_accumulate<T, D>(dk, sdst + warp * wm * ld_p, sq, ld);   // dK += dS^T Q
    }

  __syncthreads();  // the score tiles become the staging area of every warp
  float* const stage = reinterpret_cast<float*>(smem + sm::s) + warp * wm * sm::ld32;
  store_strip<D>(dv, stage, d_qkv, v_first, L.qkv_width, warp * wm, L.seq - k0);
  store_strip<D>(dk, stage, d_qkv, k_first, L.qkv_width, warp * wm, L.seq - k0);
}

// FlashAttention-2, Alg. 2, the dQ half, for one (query tile, head, batch) = (reversed blockIdx.x,
// blockIdx.y, blockIdx.z): dQ += dS K over the key tiles up to the diagonal.
template <class T, int D>
__global__ void __launch_bounds__(tile_threads)
    flash_dq_tiled_kernel(fast_layout L, dview qkv, dview lse, dview delta, dview d_out, bool d_out_vector,
                          attention_dropout drop, dview d_qkv, float scale) {
  using sm = dq_smem<D>;
  constexpr int ld = sm::ld16;
  extern __shared__ __align__(128) unsigned char smem[];
  T* const sq = reinterpret_cast<T*>(smem + sm::q);
  T* const sdo = reinterpret_cast<T*>(smem + sm::d_out);
  T* const sk = reinterpret_cast<T*>(smem + sm::k);
  T* const sv = reinterpret_cast<T*>(smem + sm::v);
  float* const ss = reinterpret_cast<float*>(smem + sm::s);
  float* const sdp = reinterpret_cast<float*>(smem + sm::dp);
  T* const sds = reinterpret_cast<T*>(smem + sm::ds);

  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x), h = blockIdx.y, b = blockIdx.z, kvh = h / L.group;
  const int q0 = qt * tile, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::size_t seq0 = static_cast<std::size_t>(b) * L.seq * L.qkv_width;
  const std::size_t q_first = seq0 + q0 * L.qkv_width + static_cast<std::size_t>(h) * D;
  load_tile<T, D>(sq, ld, qkv, q_first, L.qkv_width, L.seq - q0, true);
  load_tile<T, D>(sdo, ld, d_out, (static_cast<std::size_t>(b) * L.seq + q0) * L.out_width + static_cast<std::size_t>(h) * D,
                  L.out_width, L.seq - q0, d_out_vector);

  // The elementwise step gives each query row to a pair of lanes, each taking half of the tile's keys.
  const int r = warp * wm + lane / 2, half = lane % 2, i = q0 + r;
  const std::size_t row = (static_cast<std::size_t>(b) * L.heads + h) * L.seq + i;
  const float row_lse = i < L.seq ? lse.get(row) : 0.0f, row_delta = i < L.seq ? delta.get(row) : 0.0f;
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;

  wmma::fragment<wmma::accumulator, wm, wm, wm, float> dq[D / wm];
#pragma unroll
  for (int n = 0; n < D / wm; ++n) wmma::fill_fragment(dq[n], 0.0f);

  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * tile;
    __syncthreads();  // every warp is done with the previous K and V
    load_key_tile<T, D>(sk, sv, ld, L, qkv, b, kvh, k0);
    __syncthreads();  // K, V (and at kt = 0 Q and dO) visible to every warp

    strip_a_bt<T, D>(sq + warp * wm * ld, sk, ld, ss + warp * wm * ld_s);    // S = Q K^T, unscaled
    strip_a_bt<T, D>(sdo + warp * wm * ld, sv, ld, sdp + warp * wm * ld_s);  // dP = dO V^T
    __syncwarp();

    const float* srow = ss + r * ld_s;
    const float* dprow = sdp + r * ld_s;
    T* dsrow = sds + r * ld_p;
    for (int c = half * (tile / 2); c < (half + 1) * (tile / 2); ++c) {
      const int j = k0 + c;
      float ds = 0.0f;
      if (j <= i && i < L.seq) {
        const float p = expf(srow[c] * scale - row_lse);
        float dp = dprow[c];
        if (drop.p > 0) dp = dropout_keep(drop.seed, drop.site, row * L.seq + j, drop.p) ? dp * keep_scale : 0.0f;
        ds = p * (dp - row_delta) * scale;
      }
      dsrow[c] = to_half_type<T>(ds);
    }
    __syncwarp();

    strip_accumulate<T, D>(dq, sds + warp * wm * ld_p, sk, ld);  // dQ += dS K
  }

  __syncthreads();  // the score tiles become the staging area of every warp
  float* const stage = ss + warp * wm * dq_smem<D>::ld32;
  store_strip<D>(dq, stage, d_qkv, q_first, L.qkv_width, warp * wm, L.seq - q0);
}

// ---- fast-path dispatch ------------------------------------------------------------------------------

// The largest block of the fast path for head_dim D (the dK/dV kernel's).
std::size_t fast_smem_bytes(std::size_t d) {
  switch (d) {
    case 16: return dkv_smem<16>::bytes;
    case 32: return dkv_smem<32>::bytes;
    case 48: return dkv_smem<48>::bytes;
    case 64: return dkv_smem<64>::bytes;
    case 80: return dkv_smem<80>::bytes;
    case 96: return dkv_smem<96>::bytes;
    case 112: return dkv_smem<112>::bytes;
    case 128: return dkv_smem<128>::bytes;
    default: return 0;
  }
}

// The tiled kernels take 16-bit qkv, head_dim in {16, 32, ..., 128}, whole groups, 16-byte aligned
// rows (qkv's row stride (a + 2 kv) d is a multiple of 16 elements, so an aligned base suffices) and
// sizes that fit int; the block's shared memory must fit the device's opt-in limit.
bool fast_path(const attention_shape& sh, const view& qkv) {
  return (qkv.type == dtype::bf16 || qkv.type == dtype::fp16) && fast_smem_bytes(sh.head_dim) > 0 && sh.kv_heads > 0 &&
         sh.heads % sh.kv_heads == 0 && aligned16(qkv) && sh.batch * sh.seq * sh.qkv_width() < (std::size_t{1} << 62) &&
         sh.seq < (std::size_t{1} << 30) && sh.heads < 65536 && sh.batch < 65536 &&
         fast_smem_bytes(sh.head_dim) <= static_cast<std::size_t>(max_dynamic_smem_bytes());
}

}  // namespace

bool tiled_flash_usable(const attention_shape& sh, const view& qkv) { return fast_path(sh, qkv); }

void tiled_flash_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                         const view& lse) {
  dispatch(qkv.type, sh.head_dim, [&](auto t, auto d) {
    using T = typename decltype(t)::type;
    constexpr int D = decltype(d)::value;
    launch_flash_forward<flash_forward_tiled_kernel<T, D>, D>(forward_smem<D>::bytes, sh, qkv, drop, out, lse);
  });
}

void tiled_flash_backward(const attention_shape& sh, const view& qkv, const view& lse, const attention_dropout& drop,
                          const view& d_out, const view& delta, const view& d_qkv) {
  dispatch(qkv.type, sh.head_dim, [&](auto t, auto d) {
    using T = typename decltype(t)::type;
    constexpr int D = decltype(d)::value;
    launch_flash_backward<flash_dkv_tiled_kernel<T, D>, flash_dq_tiled_kernel<T, D>, T, D>(
        dkv_smem<D>::bytes, dq_smem<D>::bytes, sh, qkv, lse, drop, d_out, delta, d_qkv);
  });
}

}  // namespace trainplan::kernels::cuda
