// The CPU reference linear layers (gemm.hpp): forward through gemm_forward's epilogue, and the backward for
// the input and for the weight and bias, summed in fp32 (the weight's and bias's added to the stored gradients).
#include "kernels/gemm.hpp"

namespace trainplan::kernels {

void linear_forward(const view& in, const view& weight, const view* bias, const view& out, std::size_t M, std::size_t N,
                    std::size_t K) {
  gemm_forward(in, weight, bias, M, N, K, [&](std::size_t m, std::size_t n, float v) { out.set(m * N + n, v); });
}

void linear_backward_input(const view& d_out, const view& weight, const view& d_in, std::size_t M, std::size_t N,
                           std::size_t K, bool accumulate) {
  std::vector<float> w(N * K), row(N), acc(K);
  for (std::size_t i = 0; i < N * K; ++i) w[i] = weight.get(i);
  for (std::size_t m = 0; m < M; ++m) {
    for (std::size_t n = 0; n < N; ++n) row[n] = d_out.get(m * N + n);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::size_t n = 0; n < N; ++n) {
      const float g = row[n];
      const float* wn = &w[n * K];
      for (std::size_t k = 0; k < K; ++k) acc[k] += g * wn[k];
    }
    for (std::size_t k = 0; k < K; ++k) d_in.set(m * K + k, accumulate ? d_in.get(m * K + k) + acc[k] : acc[k]);
  }
}

void linear_backward_weight(const view& d_out, const view& in, const view& d_weight, const view* d_bias, std::size_t M,
                            std::size_t N, std::size_t K) {
  std::vector<float> dw(N * K, 0.0f), db(N, 0.0f), g(N), x(K);
  for (std::size_t m = 0; m < M; ++m) {
    for (std::size_t n = 0; n < N; ++n) g[n] = d_out.get(m * N + n);
    for (std::size_t k = 0; k < K; ++k) x[k] = in.get(m * K + k);
    for (std::size_t n = 0; n < N; ++n) {
      db[n] += g[n];
      float* row = &dw[n * K];
      for (std::size_t k = 0; k < K; ++k) row[k] += g[n] * x[k];
    }
  }
  for (std::size_t i = 0; i < N * K; ++i) d_weight.add(i, dw[i]);
  if (d_bias)
    for (std::size_t n = 0; n < N; ++n) d_bias->add(n, db[n]);
}

}  // namespace trainplan::kernels
