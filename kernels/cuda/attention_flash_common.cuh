#pragma once
// What both tensor-core flash attention paths share (attention_flash_tiled.cu: WMMA with the score tiles in
// shared memory; attention_flash_mma.cu: mma.sync with the scores in registers): the 64-row tiles and their
// loads, the layout of qkv, shared-memory opt-in, and the dispatch on dtype and head_dim.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "kernels/attention.hpp"
#include "kernels/cuda/common.cuh"

namespace trainplan::kernels::cuda::flash_tiles {

constexpr int tile = 64;              // query rows per query tile = keys per key tile (B_r = B_c)
constexpr int tile_warps = 4;         // warp w owns rows [16w, 16w + 16) of every tile
constexpr int tile_threads = 32 * tile_warps;

template <class T> __device__ T to_half_type(float v);
template <> __device__ inline __nv_bfloat16 to_half_type<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ inline __half to_half_type<__half>(float v) { return __float2half_rn(v); }
template <class T> constexpr dtype dtype_of();
template <> constexpr dtype dtype_of<__nv_bfloat16>() { return dtype::bf16; }
template <> constexpr dtype dtype_of<__half>() { return dtype::fp16; }

struct fast_layout {
  int seq, heads, kv_heads, group;
  std::size_t qkv_width, out_width;  // elements per token: (a + 2 kv) d and a d
};

// Rows [0, tile) of a (rows, D) slice, row r at src + r * stride, into dst (tile, ld); rows >= valid are
// zeros. 16-byte copies when `vector` (the source has type T and 16-byte aligned rows), else converted
// element by element from any dtype (d_out and out may be stored in another type than qkv).
template <class T, int D>
__device__ void load_tile(T* dst, int ld, dview src, std::size_t first, std::size_t stride, int valid, bool vector) {
  if (vector) {
    constexpr int per_row = D / 8;  // 8 16-bit elements per 16 B
    const T* base = static_cast<const T*>(src.data) + first;
    for (int x = threadIdx.x; x < tile * per_row; x += tile_threads) {
      const int r = x / per_row, c = (x % per_row) * 8;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (r < valid) val = *reinterpret_cast<const uint4*>(base + r * stride + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = val;
    }
  } else {
    for (int x = threadIdx.x; x < tile * D; x += tile_threads) {
      const int r = x / D, c = x % D;
      dst[r * ld + c] = to_half_type<T>(r < valid ? src.get(first + r * stride + c) : 0.0f);
    }
  }
}

// Key tile k0 of kv head kvh in sequence b: its K and V rows (zeros past the sequence) into shared memory.
template <class T, int D>
__device__ void load_key_tile(T* sk, T* sv, int ld, const fast_layout& L, dview qkv, int b, int kvh, int k0) {
  const std::size_t first = (static_cast<std::size_t>(b) * L.seq + k0) * L.qkv_width;
  load_tile<T, D>(sk, ld, qkv, first + static_cast<std::size_t>(L.heads + kvh) * D, L.qkv_width, L.seq - k0, true);
  load_tile<T, D>(sv, ld, qkv, first + static_cast<std::size_t>(L.heads + L.kv_heads + kvh) * D, L.qkv_width, L.seq - k0, true);
}

// The dK/dV kernels' per-query-tile inputs: query tile q0 of head h in sequence b, its Q and dO rows (zeros
// past the sequence) and its log-sum-exp and delta (FlashAttention-2, Alg. 2) into shared memory.
template <class T, int D>
__device__ void load_query_tile(T* sq, T* sdo, float* slse, float* sdelta, int ld, const fast_layout& L, dview qkv,
                                dview d_out, bool d_out_vector, dview lse, dview delta, int b, int h, int q0) {
  const std::size_t seq0 = static_cast<std::size_t>(b) * L.seq * L.qkv_width;
  const std::size_t row0 = (static_cast<std::size_t>(b) * L.heads + h) * L.seq + q0;  // lse/delta index of q0
  load_tile<T, D>(sq, ld, qkv, seq0 + q0 * L.qkv_width + static_cast<std::size_t>(h) * D, L.qkv_width, L.seq - q0, true);
  load_tile<T, D>(sdo, ld, d_out, (static_cast<std::size_t>(b) * L.seq + q0) * L.out_width + static_cast<std::size_t>(h) * D,
                  L.out_width, L.seq - q0, d_out_vector);
  for (int c = threadIdx.x; c < tile; c += tile_threads) {
    slse[c] = q0 + c < L.seq ? lse.get(row0 + c) : 0.0f;
    sdelta[c] = q0 + c < L.seq ? delta.get(row0 + c) : 0.0f;
  }
}

inline bool aligned16(const view& v) { return reinterpret_cast<std::uintptr_t>(v.data) % 16 == 0; }

inline int current_device() {
  int device = 0;
  TRAINPLAN_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

// Per-device settings are remembered for the first max_cached_devices devices; a device beyond them asks the
// driver each time (correct, only slower).
constexpr int max_cached_devices = 64;

// The opt-in dynamic shared memory limit of the current device (227 KB on an H100), read once per device.
inline int max_dynamic_smem_bytes() {
  static std::atomic<int> cached[max_cached_devices] = {};  // 0: not read yet
  const int device = current_device();
  if (device < max_cached_devices && cached[device].load(std::memory_order_relaxed) > 0)
    return cached[device].load(std::memory_order_relaxed);
  int optin = 0;
  TRAINPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (device < max_cached_devices) cached[device].store(optin, std::memory_order_relaxed);
  return optin;
}

// Raises a kernel's dynamic shared memory limit above the 48 KB default. The attribute belongs to the current
// device (cudaFuncSetAttribute), so it is set once per kernel and device: one bit per device, per kernel.
template <auto Kernel>
void allow_smem(std::size_t bytes) {
  static std::atomic<std::uint64_t> configured_devices{0};
  const int device = current_device();
  const std::uint64_t bit = device < max_cached_devices ? std::uint64_t{1} << device : 0;
  if (bit != 0 && (configured_devices.load(std::memory_order_acquire) & bit) != 0) return;
  TRAINPLAN_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  configured_devices.fetch_or(bit, std::memory_order_release);
}

inline fast_layout make_fast_layout(const attention_shape& sh) {
  return {static_cast<int>(sh.seq), static_cast<int>(sh.heads), static_cast<int>(sh.kv_heads),
          static_cast<int>(sh.heads / sh.kv_heads), sh.qkv_width(), sh.out_width()};
}

// The forward's launch, the same for both kernel sets: one block per (query tile, head, batch), the last
// query tile first (blockIdx.x reversed inside the kernel), with `smem_bytes` of dynamic shared memory.
template <auto Kernel, int D>
void launch_flash_forward(std::size_t smem_bytes, const attention_shape& sh, const view& qkv, const attention_dropout& drop,
                          const view& out, const view& lse) {
  allow_smem<Kernel>(smem_bytes);
  const dim3 grid(static_cast<unsigned>((sh.seq + tile - 1) / tile), static_cast<unsigned>(sh.heads),
                  static_cast<unsigned>(sh.batch));
  Kernel<<<grid, tile_threads, smem_bytes>>>(make_fast_layout(sh), device(qkv), drop, device(out), device(lse),
                                             1.0f / std::sqrt(static_cast<float>(D)));
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

// The backward's two launches: dK/dV per (key tile, kv head, batch), then dQ per (query tile, head, batch).
template <auto DkvKernel, auto DqKernel, class T, int D>
void launch_flash_backward(std::size_t dkv_bytes, std::size_t dq_bytes, const attention_shape& sh, const view& qkv,
                           const view& lse, const attention_dropout& drop, const view& d_out, const view& delta,
                           const view& d_qkv) {
  allow_smem<DkvKernel>(dkv_bytes);
  allow_smem<DqKernel>(dq_bytes);
  const fast_layout L = make_fast_layout(sh);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const bool d_out_vector = d_out.type == dtype_of<T>() && aligned16(d_out);
  const unsigned n_tiles = static_cast<unsigned>((sh.seq + tile - 1) / tile);
  DkvKernel<<<dim3(n_tiles, static_cast<unsigned>(sh.kv_heads), static_cast<unsigned>(sh.batch)), tile_threads, dkv_bytes>>>(
      L, device(qkv), device(lse), device(delta), device(d_out), d_out_vector, drop, device(d_qkv), scale);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  DqKernel<<<dim3(n_tiles, static_cast<unsigned>(sh.heads), static_cast<unsigned>(sh.batch)), tile_threads, dq_bytes>>>(
      L, device(qkv), device(lse), device(delta), device(d_out), d_out_vector, drop, device(d_qkv), scale);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

template <int D> using dim_tag = std::integral_constant<int, D>;

// f(type_tag<T>{}, dim_tag<D>{}) for qkv's 16-bit type and the head dim.
template <class T, class F>
void dispatch_head_dim(std::size_t d, F&& f) {
  switch (d) {
    case 16: f(type_tag<T>{}, dim_tag<16>{}); return;
    case 32: f(type_tag<T>{}, dim_tag<32>{}); return;
    case 48: f(type_tag<T>{}, dim_tag<48>{}); return;
    case 64: f(type_tag<T>{}, dim_tag<64>{}); return;
    case 80: f(type_tag<T>{}, dim_tag<80>{}); return;
    case 96: f(type_tag<T>{}, dim_tag<96>{}); return;
    case 112: f(type_tag<T>{}, dim_tag<112>{}); return;
    case 128: f(type_tag<T>{}, dim_tag<128>{}); return;
    default: throw std::logic_error("flash attention: no tiled kernel for this head_dim");
  }
}

template <class F>
void dispatch(dtype t, std::size_t d, F&& f) {
  if (t == dtype::bf16) dispatch_head_dim<__nv_bfloat16>(d, f);
  else dispatch_head_dim<__half>(d, f);
}

}  // namespace trainplan::kernels::cuda::flash_tiles
