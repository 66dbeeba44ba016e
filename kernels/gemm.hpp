#pragma once
// Linear layers as PyTorch lays them out: in (M, K), weight (N, K), out (M, N) = in . W^T + bias.
// Products accumulate in fp32 whatever the storage dtype (as cuBLAS with fp32 compute does).
#include <cstddef>
#include <vector>

#include "kernels/view.hpp"

namespace trainplan::kernels {

// Calls epilogue(m, n, value) for every output element: the caller decides where it goes (stored,
// added to a residual, masked by dropout), so no (M, N) temporary is needed.
template <typename Epilogue>
void gemm_forward(const view& in, const view& weight, const view* bias, std::size_t M, std::size_t N, std::size_t K,
                  Epilogue&& epilogue) {
  std::vector<float> w(N * K), row(K);  // kernel scratch: the GPU keeps these in registers and shared memory
  for (std::size_t i = 0; i < N * K; ++i) w[i] = weight.get(i);
  for (std::size_t m = 0; m < M; ++m) {
    for (std::size_t k = 0; k < K; ++k) row[k] = in.get(m * K + k);
    for (std::size_t n = 0; n < N; ++n) {
      float acc = bias ? bias->get(n) : 0.0f;
      const float* wn = &w[n * K];
      for (std::size_t k = 0; k < K; ++k) acc += row[k] * wn[k];
      epilogue(m, n, acc);
    }
  }
}

// out = in . W^T + bias, stored (rounded to out's dtype).
void linear_forward(const view& in, const view& weight, const view* bias, const view& out, std::size_t M, std::size_t N,
                    std::size_t K);

// d_in (M, K) = d_out (M, N) . W (N, K); added to d_in when accumulate is set.
void linear_backward_input(const view& d_out, const view& weight, const view& d_in, std::size_t M, std::size_t N,
                           std::size_t K, bool accumulate);

// d_weight (N, K) += d_out^T . in; d_bias (N) += column sums of d_out. Each gradient element is summed in
// fp32 and added to its stored value once.
void linear_backward_weight(const view& d_out, const view& in, const view& d_weight, const view* d_bias, std::size_t M,
                            std::size_t N, std::size_t K);

}  // namespace trainplan::kernels
