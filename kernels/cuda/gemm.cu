// Linear layers through cublasGemmEx with fp32 accumulation. Row-major (M, K) x (N, K)^T is computed as
// the column-major product (N, M) = W^T-view x in-view, so no transposed copies are made.
#include <algorithm>
#include <limits>
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

cudaDataType_t cuda_type(dtype t) {
  switch (t) {
    case dtype::fp32: return CUDA_R_32F;
    case dtype::bf16: return CUDA_R_16BF;
    case dtype::fp16: return CUDA_R_16F;
    default: throw std::runtime_error("gemm: unsupported dtype");
  }
}

// Writes the bias into every row of the output, which the GEMM then adds to (beta = 1): the sum is rounded
// to the output's dtype once, in cuBLAS's epilogue, as the CPU reference rounds bias + product once.
__global__ void broadcast_bias_kernel(dview out, dview bias, std::size_t M, std::size_t N) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < M * N) out.set(i, bias.get(i % N));
}

// d_bias[n] += sum over rows of d_out[:, n]. A block of 32 x 32 threads takes 32 columns: each of its 32
// rows of threads sums every 32nd row (a warp reads 32 adjacent columns: coalesced), then the 32 partial
// sums of a column are added in shared memory and stored once. Deterministic; no scratch, no atomics.
constexpr unsigned column_tile = 32;
__global__ void column_sum_kernel(dview d_out, dview d_bias, std::size_t M, std::size_t N) {
  __shared__ float partial[column_tile][column_tile + 1];  // +1: the column read below hits 32 banks
  const std::size_t n = blockIdx.x * static_cast<std::size_t>(column_tile) + threadIdx.x;
  float acc = 0;
  if (n < N)
    for (std::size_t m = threadIdx.y; m < M; m += column_tile) acc += d_out.get(m * N + n);
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && n < N) {
    float sum = 0;
    for (unsigned r = 0; r < column_tile; ++r) sum += partial[r][threadIdx.x];
    d_bias.set(n, d_bias.get(n) + sum);
  }
}

void gemm(cublasOperation_t ta, cublasOperation_t tb, std::size_t m, std::size_t n, std::size_t k, const view& a,
          std::size_t lda, const view& b, std::size_t ldb, float beta, const view& c, std::size_t ldc) {
  const float alpha = 1.0f;
  if (std::max({m, n, k, lda, ldb, ldc}) > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error("gemm: a dimension is larger than cuBLAS's 32-bit interface takes");
  TRAINPLAN_CUBLAS_CHECK(cublasGemmEx(cublas_handle(), ta, tb, static_cast<int>(m), static_cast<int>(n),
                                      static_cast<int>(k), &alpha, a.data, cuda_type(a.type), static_cast<int>(lda), b.data,
                                      cuda_type(b.type), static_cast<int>(ldb), &beta, c.data, cuda_type(c.type),
                                      static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void linear_forward(const view& in, const view& weight, const view* bias, const view& out, std::size_t M, std::size_t N,
                    std::size_t K) {
  if (M == 0 || N == 0) return;
  if (bias) {
    broadcast_bias_kernel<<<blocks_for(M * N, 256), 256>>>(device(out), device(*bias), M, N);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
  }
  gemm(CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, weight, K, in, K, bias ? 1.0f : 0.0f, out, N);
}

void linear_backward_input(const view& d_out, const view& weight, const view& d_in, std::size_t M, std::size_t N,
                           std::size_t K, bool accumulate) {
  gemm(CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, weight, K, d_out, N, accumulate ? 1.0f : 0.0f, d_in, K);
}

void linear_backward_weight(const view& d_out, const view& in, const view& d_weight, const view* d_bias, std::size_t M,
                            std::size_t N, std::size_t K) {
  gemm(CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, in, K, d_out, N, 1.0f, d_weight, K);
  if (d_bias && N > 0) {
    column_sum_kernel<<<blocks_for(N, column_tile), dim3(column_tile, column_tile)>>>(device(d_out), device(*d_bias), M, N);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace trainplan::kernels::cuda
