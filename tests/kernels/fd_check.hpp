#pragma once
// Finite-difference checks for kernel backward passes. A kernel's output y is reduced to the scalar
// L = sum_i w_i y_i with fixed random w, so dL/dy = w is the upstream gradient fed to the backward. For a
// few random directions v, the analytic <dL/dx, v> must match the central difference
// (L(x + eps v) - L(x - eps v)) / (2 eps).
// Tolerance: fp32 forward evaluations carry ~1e-7 relative noise, divided by eps = 1e-2 gives ~1e-5;
// truncation error is O(eps^2) ~ 1e-4 for these smooth functions. 2e-3 relative leaves a margin of 10.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include "kernels/dropout.hpp"
#include "kernels/view.hpp"

namespace trainplan::test {

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(2.0 * kernels::uniform_hash(seed, 77, i) - 1.0);
  return v;
}

inline kernels::view fp32_view(std::vector<float>& v) { return {v.data(), dtype::fp32, v.size()}; }

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// loss(x) evaluates the forward and returns L; grad is dL/dx from the backward.
inline void check_gradient(const char* what, std::vector<float> x, const std::vector<float>& grad,
                           const std::function<double(const std::vector<float>&)>& loss, double eps = 1e-2,
                           double rel_tol = 2e-3) {
  INFO(what);
  REQUIRE(grad.size() == x.size());
  for (std::uint64_t d = 0; d < 3; ++d) {
    const std::vector<float> v = random_vector(x.size(), 1000 + d);
    std::vector<float> plus = x, minus = x;
    for (std::size_t i = 0; i < x.size(); ++i) plus[i] += static_cast<float>(eps) * v[i], minus[i] -= static_cast<float>(eps) * v[i];
    const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
    const double analytic = dot(grad, v);
    double norm = 0;
    for (float g : grad) norm += static_cast<double>(g) * g;
    CHECK(std::abs(numeric - analytic) <= rel_tol * (std::sqrt(norm * x.size()) + 1e-6));
  }
}

}  // namespace trainplan::test
