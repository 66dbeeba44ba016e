// Linear layers through cuBLAS with fp32 accumulation. Row-major (M, K) x (N, K)^T is computed as the
// column-major product (N, M) = W^T-view x in-view, so no transposed copies are made. A forward with a bias
// runs through cuBLASLt with the bias added in its epilogue (llm.c's matmul_forward_cublaslt,
// llmc/matmul.cuh); everything else, and any shape cuBLASLt has no algorithm for, through cublasGemmEx.
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <map>
#include <stdexcept>
#include <cstdint>
#include <tuple>

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

void check_int_range(std::initializer_list<std::size_t> dims) {
  if (std::max(dims) > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error("gemm: a dimension is larger than cuBLAS's 32-bit interface takes");
}

void gemm(cublasOperation_t ta, cublasOperation_t tb, std::size_t m, std::size_t n, std::size_t k, const view& a,
          std::size_t lda, const view& b, std::size_t ldb, float beta, const view& c, std::size_t ldc) {
  const float alpha = 1.0f;
  check_int_range({m, n, k, lda, ldb, ldc});
  TRAINPLAN_CUBLAS_CHECK(cublasGemmEx(cublas_handle(), ta, tb, static_cast<int>(m), static_cast<int>(n),
                                      static_cast<int>(k), &alpha, a.data, cuda_type(a.type), static_cast<int>(lda), b.data,
                                      cuda_type(b.type), static_cast<int>(ldb), &beta, c.data, cuda_type(c.type),
                                      static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// out (M, N) = in (M, K) . W (N, K)^T + bias in one cuBLASLt call: the bias is added to the fp32 sum in the
// epilogue and the result rounded once, as the CPU reference rounds bias + product once, and the output is
// written once instead of twice (the broadcast, then the GEMM's beta = 1 read and write). The descriptors
// and the heuristic's algorithm are kept per shape and dtypes: a training step asks for the same few shapes
// every layer, and finding an algorithm costs host time a launch-bound step cannot spare. false when
// cuBLASLt offers no algorithm (the caller then takes the two-kernel path).
struct lt_plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
};

// The largest power of two up to 256 that divides the address: what the heuristic may assume of a pointer
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, 256 unless told). Views into a flat buffer can sit at any
// element boundary.
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

struct lt_shape {
  std::size_t M, N, K;
  dtype in, w, out;
  std::uint32_t in_alignment, w_alignment, out_alignment;
  auto tie() const { return std::tie(M, N, K, in, w, out, in_alignment, w_alignment, out_alignment); }
  bool operator<(const lt_shape& o) const { return tie() < o.tie(); }
};

lt_plan make_lt_plan(const lt_shape& s) {
  const auto [M, N, K, in, w, out, in_alignment, w_alignment, out_alignment] = s;
  lt_plan p;
  const cublas_workspace ws = cublas_workspace_of_handle();
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  // The bias has the output's dtype (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE's default; the caller checked).
  // Stored layouts, column-major: the weight K x N (transposed by the op), the input K x M, the output N x M.
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, cuda_type(w), K, N, static_cast<std::int64_t>(K)));
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, cuda_type(in), K, M, static_cast<std::int64_t>(K)));
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, cuda_type(out), N, M, static_cast<std::int64_t>(N)));
  cublasLtMatmulPreference_t preference = nullptr;
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::size_t workspace_bytes = ws.bytes;
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                              &workspace_bytes, sizeof workspace_bytes));
  // Split-K partial sums only in fp32 (as cublas_handle's CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION):
  // never reduced in the output's 16 bits, in place or in the workspace.
  const std::uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                              &reductions, sizeof reductions));
  for (const auto& [attribute, bytes] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, w_alignment},
                                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, in_alignment},
                                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, out_alignment},
                                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, out_alignment}})
    TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof bytes));
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), p.op, p.a, p.b, p.d, p.d, preference, 1, &found, &count);
  cublasLtMatmulPreferenceDestroy(preference);
  p.usable = status == CUBLAS_STATUS_SUCCESS && count > 0;
  if (p.usable) p.algo = found.algo;
  return p;
}

bool linear_forward_bias_lt(const view& in, const view& weight, const view& bias, const view& out, std::size_t M,
                            std::size_t N, std::size_t K) {
  // The epilogue reads the bias in the output's dtype, from a 16-byte aligned address (llm.c requires every
  // cuBLASLt pointer so aligned; no preference describes the bias's alignment).
  if (bias.type != out.type || alignment_of(bias.data) < 16) return false;
  static std::map<lt_shape, lt_plan> plans;  // never freed: a handful of shapes, for the process's life
  const lt_shape k{M, N, K, in.type, weight.type, out.type, alignment_of(in.data), alignment_of(weight.data),
                   alignment_of(out.data)};
  auto it = plans.find(k);
  if (it == plans.end()) it = plans.emplace(k, make_lt_plan(k)).first;
  const lt_plan& p = it->second;
  if (!p.usable) return false;
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias.data, sizeof bias.data));
  const float alpha = 1.0f, beta = 0.0f;
  const cublas_workspace ws = cublas_workspace_of_handle();
  TRAINPLAN_CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), p.op, &alpha, weight.data, p.a, in.data, p.b, &beta, out.data,
                                        p.d, out.data, p.d, &p.algo, ws.data, ws.bytes, 0));
  return true;
}

}  // namespace

void linear_forward(const view& in, const view& weight, const view* bias, const view& out, std::size_t M, std::size_t N,
                    std::size_t K) {
  if (M == 0 || N == 0) return;
  check_int_range({M, N, K});
  if (bias && K > 0 && linear_forward_bias_lt(in, weight, *bias, out, M, N, K)) return;
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
