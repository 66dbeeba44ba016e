#pragma once
// Shared by the CUDA kernels: checked calls, dtype-generic loads and stores, block reductions, the
// SplitMix64 hash of kernels/dropout.cpp (so CPU and GPU drop the same elements), and the typed, vectorised
// pointwise machinery at the end (after llm.c's Packed128 and load128/store128, llmc/cuda_utils.cuh,
// github.com/karpathy/llm.c: one 128-bit access moves 16 bytes of a tensor).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/view.hpp"

#define TRAINPLAN_CUDA_CHECK(call)                                                                                \
  do {                                                                                                            \
    const cudaError_t trainplan_err_ = (call);                                                                    \
    if (trainplan_err_ != cudaSuccess)                                                                            \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #call ": " +         \
                               cudaGetErrorString(trainplan_err_));                                               \
  } while (0)

#define TRAINPLAN_CUBLAS_CHECK(call)                                                                              \
  do {                                                                                                            \
    const cublasStatus_t trainplan_status_ = (call);                                                              \
    if (trainplan_status_ != CUBLAS_STATUS_SUCCESS)                                                               \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #call ": " +         \
                               cublasGetStatusString(trainplan_status_));                                         \
  } while (0)

// After a kernel launch: launch errors now, execution errors at the next synchronizing call.
#define TRAINPLAN_CUDA_LAUNCH_CHECK() TRAINPLAN_CUDA_CHECK(cudaGetLastError())

namespace trainplan::kernels::cuda {

// A device pointer with its dtype, read and written as float (rounded to nearest even on store).
struct dview {
  void* data;
  dtype type;

  __device__ float get(std::size_t i) const {
    switch (type) {
      case dtype::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
      case dtype::fp16: return __half2float(static_cast<const __half*>(data)[i]);
      case dtype::u8: case dtype::fp8: return static_cast<const std::uint8_t*>(data)[i];
      case dtype::i32: return static_cast<float>(static_cast<const std::int32_t*>(data)[i]);
      case dtype::i64: return static_cast<float>(static_cast<const std::int64_t*>(data)[i]);
      default: return static_cast<const float*>(data)[i];
    }
  }
  __device__ void set(std::size_t i, float v) const {
    switch (type) {
      case dtype::bf16: static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v); return;
      case dtype::fp16: static_cast<__half*>(data)[i] = __float2half_rn(v); return;
      case dtype::u8: case dtype::fp8: static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t>(v); return;
      case dtype::i32: static_cast<std::int32_t*>(data)[i] = static_cast<std::int32_t>(v); return;
      case dtype::i64: static_cast<std::int64_t*>(data)[i] = static_cast<std::int64_t>(v); return;
      default: static_cast<float*>(data)[i] = v; return;
    }
  }
  __device__ std::int32_t get_i32(std::size_t i) const { return static_cast<const std::int32_t*>(data)[i]; }
};

inline dview device(const view& v) { return {v.data, v.type}; }

// What a store of v into a buffer of type t keeps (kernels/view.hpp's round_to, on the device): 16-bit types
// round to nearest even, the others keep v.
__device__ inline float rounded_as(dtype t, float v) {
  switch (t) {
    case dtype::bf16: return __bfloat162float(__float2bfloat16_rn(v));
    case dtype::fp16: return __half2float(__float2half_rn(v));
    default: return v;
  }
}

inline unsigned blocks_for(std::size_t n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// Sum over a thread block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ inline float block_sum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial may still be read from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float block_max(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__host__ __device__ inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ inline bool dropout_keep(std::uint64_t seed, std::uint64_t site, std::uint64_t index, float p) {
  if (p <= 0.0f) return true;
  const std::uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ site) ^ index);
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0) >= p;
}

// ---- Typed, vectorised pointwise kernels ---------------------------------------------------------------------
// A pointwise op is a struct whose operands are typed device pointers (const T* read, T* written), dviews (the
// untyped fallback: a dtype switch per element), or no_operand (an absent optional operand), with
//   template <int N> __device__ void apply(std::size_t i) const;
// processing elements [i, i + N): N is pack_elements on the vector path, 1 on the scalar path. apply loads all
// its inputs before it stores, so an output may alias an input. The host picks the element types once from
// the views' dtypes (with_float_type) and launches pointwise_kernel through launch_pointwise.
//
// Vector path (as llm.c's Packed128): a thread moves pack_elements = 8 elements of every operand per step:
// 16-bit values as one 16-byte load/store (int4), fp32 as two 16-byte accesses, u8 masks as one 8-byte access.
// It is taken when every typed pointer is aligned to min(16, 8 * sizeof(T)) bytes; the last n % 8 elements
// then go one at a time, as does every element of a call with a misaligned pointer.

struct no_operand {};  // an absent optional operand: no dropout mask, no low-precision copy

template <class T>
struct type_tag {
  using type = T;
};

constexpr int pack_elements = 8;
constexpr unsigned pointwise_threads = 256;
// 132 SMs (H100 SXM) x 16 blocks of 256 threads: enough to fill any of the targets; grid-stride beyond that, so
// n up to 2^33 and more never overflows gridDim.x.
constexpr std::size_t pointwise_max_blocks = 132 * 16;

template <class T>
constexpr std::size_t pack_alignment = sizeof(T) * pack_elements < 16 ? sizeof(T) * pack_elements : 16;

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(std::uint8_t v) { return static_cast<float>(v); }

// The stores round as dview::set does.
template <class T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) { return v; }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ inline __half from_float<__half>(float v) { return __float2half_rn(v); }

// Eight elements at p (aligned to pack_alignment<T>) in 16-byte accesses (8 bytes for a 1-byte type).
template <class T>
__device__ inline void load_pack(const T* p, T (&out)[pack_elements]) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "1, 2 or 4-byte elements");
  if constexpr (sizeof(T) == 1) {
    const uint2 bits = *reinterpret_cast<const uint2*>(p);
    memcpy(out, &bits, sizeof(bits));
  } else {
    constexpr int accesses = sizeof(T) * pack_elements / 16;
    int4 bits[accesses];
#pragma unroll
    for (int k = 0; k < accesses; ++k) bits[k] = reinterpret_cast<const int4*>(p)[k];
    memcpy(out, bits, sizeof(bits));
  }
}

template <class T>
__device__ inline void store_pack(T* p, const T (&in)[pack_elements]) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "2 or 4-byte elements");
  constexpr int accesses = sizeof(T) * pack_elements / 16;
  int4 bits[accesses];
  memcpy(bits, in, sizeof(bits));
#pragma unroll
  for (int k = 0; k < accesses; ++k) reinterpret_cast<int4*>(p)[k] = bits[k];
}

// Elements [i, i + N) as floats: a pack when N is pack_elements, else one element at a time.
template <int N, class T>
__device__ inline void load_floats(const T* p, std::size_t i, float (&out)[N]) {
  if constexpr (N == pack_elements) {
    T pack[pack_elements];
    load_pack(p + i, pack);
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = to_float(pack[k]);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = to_float(p[i + k]);
  }
}
template <int N>
__device__ inline void load_floats(const dview& d, std::size_t i, float (&out)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = d.get(i + k);
}

template <int N, class T>
__device__ inline void store_floats(T* p, std::size_t i, const float (&in)[N]) {
  if constexpr (N == pack_elements) {
    T pack[pack_elements];
#pragma unroll
    for (int k = 0; k < N; ++k) pack[k] = from_float<T>(in[k]);
    store_pack(p + i, pack);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) p[i + k] = from_float<T>(in[k]);
  }
}
template <int N>
__device__ inline void store_floats(const dview& d, std::size_t i, const float (&in)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) d.set(i + k, in[k]);
}

// What a store of v into the operand keeps (the value a read-back would return): rounded to a typed operand's
// element type; a dview operand is read back from memory (element i + k, just stored by this thread).
template <int N, class T>
__device__ inline void stored_values(T* /*p*/, std::size_t /*i*/, float (&v)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = to_float(from_float<T>(v[k]));
}
template <int N>
__device__ inline void stored_values(const dview& d, std::size_t i, float (&v)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = d.get(i + k);
}

// Operands from a view's data, typed or absent.
template <class T>
using input_operand_t = std::conditional_t<std::is_same_v<T, no_operand>, no_operand, const T*>;
template <class T>
using output_operand_t = std::conditional_t<std::is_same_v<T, no_operand>, no_operand, T*>;
template <class T>
inline input_operand_t<T> input_operand(const void* data) {
  if constexpr (std::is_same_v<T, no_operand>) return no_operand{};
  else return static_cast<const T*>(data);
}
template <class T>
inline output_operand_t<T> output_operand(void* data) {
  if constexpr (std::is_same_v<T, no_operand>) return no_operand{};
  else return static_cast<T*>(data);
}

template <class T>
inline bool pack_aligned(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % pack_alignment<T> == 0;
}
inline bool pack_aligned(no_operand) { return true; }
inline bool pack_aligned(const dview&) { return false; }
template <class... Operands>
inline bool all_pack_aligned(const Operands&... operands) {
  return (pack_aligned(operands) && ...);
}

// Calls f(type_tag<T>{}) with T the element type of a floating-point dtype (fp32 and tf32: float; bf16; fp16)
// and returns what f returns (whether it launched); false for any other dtype.
template <class F>
inline bool with_float_type(dtype t, F&& f) {
  switch (t) {
    case dtype::fp32: case dtype::tf32: return f(type_tag<float>{});
    case dtype::bf16: return f(type_tag<__nv_bfloat16>{});
    case dtype::fp16: return f(type_tag<__half>{});
    default: return false;
  }
}

// The same for a dropout mask: absent (no_operand) or one byte per element (u8, or fp8 read as u8 as dview does).
template <class F>
inline bool with_mask_type(const view* mask, F&& f) {
  if (mask == nullptr || mask->data == nullptr) return f(type_tag<no_operand>{});
  if (mask->type == dtype::u8 || mask->type == dtype::fp8) return f(type_tag<std::uint8_t>{});
  return false;
}

template <bool Vectorized, class Op>
__global__ void __launch_bounds__(pointwise_threads) pointwise_kernel(const Op op, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::size_t scalar_from = 0;
  if constexpr (Vectorized) {
    const std::size_t packs = n / pack_elements;
    for (std::size_t p = first; p < packs; p += stride) op.template apply<pack_elements>(p * pack_elements);
    scalar_from = packs * pack_elements;  // the tail: fewer than pack_elements elements
  }
  for (std::size_t i = scalar_from + first; i < n; i += stride) op.template apply<1>(i);
}

// Runs op over n elements: packs of 8 when `vectorized` (the caller checked the alignment), else one by one.
template <class Op>
inline void launch_pointwise(const Op& op, std::size_t n, bool vectorized) {
  if (n == 0) return;
  const std::size_t work = vectorized ? std::max<std::size_t>(n / pack_elements, n % pack_elements) : n;
  const std::size_t blocks = std::min(pointwise_max_blocks, (work + pointwise_threads - 1) / pointwise_threads);
  if (vectorized) pointwise_kernel<true><<<static_cast<unsigned>(blocks), pointwise_threads>>>(op, n);
  else pointwise_kernel<false><<<static_cast<unsigned>(blocks), pointwise_threads>>>(op, n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}
// The untyped fallback (dview operands): the scalar path only.
template <class Op>
inline void launch_pointwise_scalar(const Op& op, std::size_t n) {
  if (n == 0) return;
  const std::size_t blocks = std::min(pointwise_max_blocks, (n + pointwise_threads - 1) / pointwise_threads);
  pointwise_kernel<false><<<static_cast<unsigned>(blocks), pointwise_threads>>>(op, n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

cublasHandle_t cublas_handle();  // one per process, with its workspace (runtime.cu)
cublasLtHandle_t cublaslt_handle();  // one per process (runtime.cu); it takes the workspace below per call
struct cublas_workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};
cublas_workspace cublas_workspace_of_handle();  // cublas_handle's, allocated with it (outside the arena)

}  // namespace trainplan::kernels::cuda
