#pragma once
// Shared by the CUDA kernels: checked calls, dtype-generic loads and stores, block reductions, and the
// SplitMix64 hash of kernels/dropout.cpp (so CPU and GPU drop the same elements).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

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

cublasHandle_t cublas_handle();  // one per process, with its workspace (runtime.cu)

}  // namespace trainplan::kernels::cuda
