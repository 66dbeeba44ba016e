#include "planner/timing_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "planner/input_error.hpp"

namespace trainplan {
namespace {

// Per run, with the device constants fixed: measured = device + kernels * a + b + tensors * c.
struct linear_terms {
  double device = 0, kernels = 0, tensors = 0, measured = 0;
};

// Solves the 3-unknown least squares over the subset of unknowns in `mask` (others 0), rows weighted by
// 1 / measured. Returns false when the normal equations are singular or a solution is negative.
bool solve_subset(const std::vector<linear_terms>& rows, unsigned mask, std::array<double, 3>& x) {
  std::array<int, 3> idx{};
  int n = 0;
  for (int i = 0; i < 3; ++i)
    if (mask & (1u << i)) idx[n++] = i;
  x = {0, 0, 0};
  if (n == 0) return true;
  double A[3][4] = {};
  for (const auto& r : rows) {
    const double w = 1.0 / r.measured;
    const std::array<double, 3> col = {r.kernels * w, w, r.tensors * w};
    const double y = (r.measured - r.device) * w;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) A[i][j] += col[idx[i]] * col[idx[j]];
      A[i][n] += col[idx[i]] * y;
    }
  }
  for (int i = 0; i < n; ++i) {  // Gaussian elimination with partial pivoting
    int p = i;
    for (int r = i + 1; r < n; ++r)
      if (std::abs(A[r][i]) > std::abs(A[p][i])) p = r;
    if (std::abs(A[p][i]) < 1e-300) return false;
    for (int c = 0; c <= n; ++c) std::swap(A[i][c], A[p][c]);
    for (int r = 0; r < n; ++r) {
      if (r == i) continue;
      const double f = A[r][i] / A[i][i];
      for (int c = i; c <= n; ++c) A[r][c] -= f * A[i][c];
    }
  }
  for (int i = 0; i < n; ++i) {
    x[idx[i]] = A[i][n] / A[i][i];
    if (!(x[idx[i]] >= 0) || !std::isfinite(x[idx[i]])) return false;
  }
  return true;
}

// The host-side unknowns (per kernel, per step, per foreach tensor) within data/calibration.json's ranges.
bool within_limits(const std::array<double, 3>& x) {
  return x[0] <= timing_limits::max_kernel_seconds && x[1] <= timing_limits::max_step_seconds &&
         x[2] <= timing_limits::max_foreach_tensor_seconds;
}

double relative_error_sum(const std::vector<linear_terms>& rows, const std::array<double, 3>& x) {
  double sum = 0;
  for (const auto& r : rows) {
    const double e = (r.device + r.kernels * x[0] + x[1] + r.tensors * x[2] - r.measured) / r.measured;
    sum += e * e;
  }
  return sum;
}

}  // namespace

timing_fit fit_timing(const std::vector<timing_observation>& runs) {
  if (runs.empty()) throw input_error("calibrate: no measured step times to fit");
  for (const auto& r : runs)
    if (!(std::isfinite(r.measured_seconds) && r.measured_seconds > 0) || !(r.peak_flops_per_s > 0) ||
        !(r.bandwidth_bytes_per_s > 0))
      throw input_error(fmt::format("calibrate: {}: step time, peak and bandwidth must be positive numbers", r.label));

  timing_fit best;
  double best_error = std::numeric_limits<double>::infinity();
  std::vector<linear_terms> rows(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    double kernels = 0;
    for (const step_op& op : runs[i].ops.ops) kernels += op.kernels;
    rows[i].kernels = kernels;
    rows[i].tensors = runs[i].ops.foreach_tensors;
    rows[i].measured = runs[i].measured_seconds;
  }
  timing_constants k;
  // Ranges a GPU can physically reach: cuBLAS tops out near 80% of a tensor-core peak and 95% of the
  // CUDA-core fp32 peak, fused attention near 75%, streaming kernels near 95% of HBM bandwidth.
  bool any_fp32 = false;
  for (const auto& r : runs) any_fp32 = any_fp32 || r.ops.fp32_gemms;
  // Steps of 5 points, counted in integers so that the fitted values are exact (0.8, not 0.8000000000000002).
  auto percent_steps = [](int from, int to) {
    std::vector<double> v;
    for (int p = from; p <= to; p += 5) v.push_back(p / 100.0);
    return v;
  };
  const std::vector<double> gemm_grid = percent_steps(30, 80), attention_grid = percent_steps(10, 75),
                            bandwidth_grid = percent_steps(50, 95);
  const std::vector<double> fp32_grid = any_fp32 ? percent_steps(50, 95) : std::vector<double>{k.fp32_gemm_efficiency};
  for (double gemm : gemm_grid)
    for (double fp32 : fp32_grid)
      for (double half : {0.0, 32.0, 64.0, 128.0, 256.0})
        for (double attention : attention_grid)
          for (double bandwidth : bandwidth_grid) {
            k.gemm_efficiency = gemm, k.gemm_half_dim = half, k.attention_efficiency = attention,
            k.bandwidth_fraction = bandwidth, k.fp32_gemm_efficiency = fp32;
            for (std::size_t i = 0; i < runs.size(); ++i) {
              double device = 0;
              for (const step_op& op : runs[i].ops.ops)
                device += op_device_seconds(op, runs[i].peak_flops_per_s, runs[i].bandwidth_bytes_per_s, k,
                                            runs[i].ops.fp32_gemms);
              rows[i].device = device;
            }
            for (unsigned mask = 0; mask < 8; ++mask) {
              std::array<double, 3> x;
              // Only what the loader accepts: a fit `plan calibrate -o` could not write back is no fit.
              if (!solve_subset(rows, mask, x) || !within_limits(x)) continue;
              const double error = relative_error_sum(rows, x);
              if (error < best_error - 1e-15) {
                best_error = error;
                best.constants = k;
                best.constants.kernel_seconds = x[0];
                best.constants.step_seconds = x[1];
                best.constants.foreach_tensor_seconds = x[2];
              }
            }
          }

  std::vector<double> errors;
  for (const auto& r : runs) {
    const double t =
        estimate_op_times(r.ops, r.peak_flops_per_s, r.bandwidth_bytes_per_s, best.constants).total();
    best.predicted_seconds.push_back(t);
    errors.push_back(100.0 * std::abs(t - r.measured_seconds) / r.measured_seconds);
  }
  best.max_error_pct = *std::max_element(errors.begin(), errors.end());
  std::sort(errors.begin(), errors.end());
  best.median_error_pct = errors.size() % 2 ? errors[errors.size() / 2]
                                            : (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]) / 2;
  return best;
}

}  // namespace trainplan
