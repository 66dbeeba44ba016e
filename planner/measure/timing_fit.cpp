// The roofline's constants fitted to measured step times (timing_fit.hpp): the device constants on a grid, the
// host costs by non-negative least squares over each run's schedules, and the leave-one-out predictions.
#include "planner/measure/timing_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <thread>

#include "planner/measure/median.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

// The host-side unknowns, on which each of planner/time/roofline.cpp's schedules is linear: the gap per kernel,
// the step's fixed host cost, the host's cost per forward and per backward launch, per foreach tensor.
constexpr int unknowns = host_unknowns;
using host_vector = host_costs;
constexpr std::array<double, unknowns> unknown_limits = {
    timing_limits::max_kernel_seconds, timing_limits::max_step_seconds, timing_limits::max_host_kernel_seconds,
    timing_limits::max_host_kernel_seconds, timing_limits::max_foreach_tensor_seconds};

// One run at one grid point of the device constants: its schedules (planner/time/roofline.cpp, schedules_of),
// each a constant + coefficients . x.
struct run_terms {
  step_schedules schedules;
  double measured = 0;
  // The roofline's kernel time (its phases summed: op_time_breakdown::kernel_seconds) and the measured busy time.
  double kernel_seconds = 0, busy = 0;

  double schedule(int j, const host_vector& x) const { return schedules.terms[j].seconds(x); }
  int longest(const host_vector& x) const {
    int best = 0;
    for (int j = 1; j < schedules.count; ++j)
      if (schedule(j, x) > schedule(best, x)) best = j;
    return best;
  }
};

// The device side against the profiled runs' busy time: it depends on the grid point alone, not on the host
// costs the least squares solve for.
double busy_error_sum(const std::vector<run_terms>& rows) {
  double sum = 0;
  for (const auto& r : rows)
    if (r.busy > 0) {
      const double e = (r.kernel_seconds - r.busy) / r.busy;
      sum += e * e;
    }
  return sum;
}

double relative_error_sum(const std::vector<run_terms>& rows, const host_vector& x) {
  double sum = 0;
  for (const auto& r : rows) {
    if (r.measured <= 0) continue;  // a busy time alone
    const double e = (r.schedule(r.longest(x), x) - r.measured) / r.measured;
    sum += e * e;
  }
  return sum;
}

// Least squares over the unknowns in `mask` (others 0) with each run's schedule fixed (branch[i]), rows
// weighted by 1 / measured. False when the normal equations are singular or a solution leaves its range.
bool solve_subset(const std::vector<run_terms>& rows, const std::vector<int>& branch, unsigned mask, host_vector& x) {
  std::array<int, unknowns> idx{};
  int n = 0;
  for (int i = 0; i < unknowns; ++i)
    if (mask & (1u << i)) idx[n++] = i;
  x = {};
  if (n == 0) return true;
  double A[unknowns][unknowns + 1] = {};
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].measured <= 0) continue;  // a busy time alone: no step time to solve the host costs on
    const double w = 1.0 / rows[r].measured;
    const schedule_term& term = rows[r].schedules.terms[branch[r]];
    const host_vector& col = term.coefficients;
    const double y = (rows[r].measured - term.device_seconds) * w;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) A[i][j] += col[idx[i]] * w * col[idx[j]] * w;
      A[i][n] += col[idx[i]] * w * y;
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
    // Only what the loader accepts: a fit `plan calibrate -o` could not write back is no fit.
    if (!(x[idx[i]] >= 0) || !std::isfinite(x[idx[i]]) || x[idx[i]] > unknown_limits[idx[i]]) return false;
  }
  return true;
}

// Non-negative least squares with the schedules fixed: the unconstrained solution when it is feasible (then
// it is the optimum), else the best feasible one over the faces of the constraint set.
bool solve_fixed_schedules(const std::vector<run_terms>& rows, const std::vector<int>& branch, host_vector& best) {
  constexpr unsigned all = (1u << unknowns) - 1;
  if (solve_subset(rows, branch, all, best)) return true;
  double best_error = std::numeric_limits<double>::infinity();
  for (unsigned mask = 0; mask < all; ++mask) {
    host_vector x;
    if (!solve_subset(rows, branch, mask, x)) continue;
    double e = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].measured <= 0) continue;
      const double d = (rows[r].schedule(branch[r], x) - rows[r].measured) / rows[r].measured;
      e += d * d;
    }
    if (e < best_error) best_error = e, best = x;
  }
  return std::isfinite(best_error);
}

// The step time is the longest schedule, so it is piecewise linear in x: alternate between fixing which
// schedule is longest for each run and solving the least squares for that choice, from `start`, until the
// choice stops changing (a few rounds). Returns the relative error sum of the best x met.
double fit_host(const std::vector<run_terms>& rows, host_vector start, host_vector& best) {
  double best_error = std::numeric_limits<double>::infinity();
  std::vector<int> branch(rows.size()), previous(rows.size(), -1);
  host_vector x = start;
  for (int round = 0; round < 8; ++round) {
    for (std::size_t r = 0; r < rows.size(); ++r) branch[r] = rows[r].longest(x);
    if (branch == previous) break;
    previous = branch;
    if (!solve_fixed_schedules(rows, branch, x)) break;
    const double e = relative_error_sum(rows, x);
    if (e < best_error - 1e-15) best_error = e, best = x;
  }
  return best_error;
}

}  // namespace

timing_fit fit_timing(const std::vector<timing_observation>& runs) {
  bool any_step = false;
  for (const auto& r : runs) {
    if (!(std::isfinite(r.measured_seconds) && r.measured_seconds >= 0) || !(r.peak_flops_per_s > 0) ||
        !(r.bandwidth_bytes_per_s > 0))
      throw input_error(fmt::format("calibrate: {}: step time, peak and bandwidth must be positive numbers", r.label));
    if (!(std::isfinite(r.busy_seconds) && r.busy_seconds >= 0))
      throw input_error(fmt::format("calibrate: {}: the GPU's busy time must be a number of seconds, 0 when not profiled", r.label));
    if (r.measured_seconds == 0 && r.busy_seconds == 0)
      throw input_error(fmt::format("calibrate: {}: neither a step time nor a busy time to fit", r.label));
    any_step = any_step || r.measured_seconds > 0;
  }
  if (!any_step) throw input_error("calibrate: no measured step times to fit (busy times alone leave the host's costs open)");

  timing_fit best;
  double best_error = std::numeric_limits<double>::infinity();
  std::vector<run_terms> rows(runs.size());
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
  // Starts for the host fit: all-device (gap and step only), and a host-bound one with PyTorch-eager-like
  // costs (tens of microseconds per Python-launched kernel); the best x so far is a third. The grid points
  // that fit best are then refitted from a wider set of starts (polish), since the alternation can stop at
  // a local minimum where a run's longest schedule is misjudged.
  const host_vector device_start = {4e-6, 0, 0, 0, 0}, host_start = {2e-6, 0.005, 30e-6, 8e-6, 50e-6};
  host_vector best_x = device_start;
  struct candidate {
    double error;
    timing_constants device;
  };
  std::vector<candidate> grid;
  auto fill_rows = [&](const timing_constants& device) {
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const roofline_rates rates(runs[i].peak_flops_per_s, runs[i].bandwidth_bytes_per_s, device, runs[i].ops.fp32_gemms);
      const phase_seconds d = device_seconds_by_phase(runs[i].ops, rates);
      rows[i] = {schedules_of(runs[i].ops, d), runs[i].measured_seconds, d.forward + d.backward + d.scaler + d.optimizer,
                 runs[i].busy_seconds};
    }
  };
  auto consider = [&](const timing_constants& device, const host_vector& start) {
    host_vector x{};
    const double error = fit_host(rows, start, x) + busy_error_sum(rows);
    if (error < best_error - 1e-15) {
      best_error = error;
      best_x = x;
      best.constants = device;
      best.constants.kernel_seconds = x[0];
      best.constants.step_seconds = x[1];
      best.constants.forward_kernel_seconds = x[2];
      best.constants.backward_kernel_seconds = x[3];
      best.constants.foreach_tensor_seconds = x[4];
    }
    return error;
  };
  for (double gemm : gemm_grid)
    for (double fp32 : fp32_grid)
      for (double half : {0.0, 32.0, 64.0, 128.0, 256.0})
        for (double attention : attention_grid)
          for (double bandwidth : bandwidth_grid) {
            k.gemm_efficiency = gemm, k.gemm_half_dim = half, k.attention_efficiency = attention,
            k.bandwidth_fraction = bandwidth, k.fp32_gemm_efficiency = fp32;
            fill_rows(k);
            double point = std::numeric_limits<double>::infinity();
            for (const host_vector& start : {device_start, host_start, best_x}) point = std::min(point, consider(k, start));
            grid.push_back({point, k});
          }
  constexpr std::size_t polished = 16;
  const std::size_t keep = std::min(polished, grid.size());
  std::partial_sort(grid.begin(), grid.begin() + static_cast<std::ptrdiff_t>(keep), grid.end(),
                    [](const candidate& a, const candidate& b) { return a.error < b.error; });
  for (std::size_t g = 0; g < keep; ++g) {
    fill_rows(grid[g].device);
    for (double forward : {5e-6, 15e-6, 30e-6, 60e-6})
      for (double backward : {1e-6, 5e-6, 15e-6, 40e-6})
        for (double gap : {0.0, 5e-6}) consider(grid[g].device, {gap, 0.002, forward, backward, 50e-6});
  }
  if (!std::isfinite(best_error)) throw input_error("calibrate: no step-time constants within their ranges fit these runs");

  std::vector<double> errors;
  for (const auto& r : runs) {
    const double t =
        estimate_op_times(r.ops, r.peak_flops_per_s, r.bandwidth_bytes_per_s, best.constants).total();
    best.predicted_seconds.push_back(t);
    if (r.measured_seconds > 0) errors.push_back(100.0 * (t - r.measured_seconds) / r.measured_seconds);
  }
  const error_summary summary = summarize_errors(errors);
  best.max_error_pct = summary.max_pct, best.median_error_pct = summary.median_pct;
  return best;
}

held_out_fit fit_held_out(const std::vector<timing_observation>& runs) {
  if (runs.size() < 2) throw input_error("calibrate: holding a run out needs at least two runs");
  std::vector<double> predicted(runs.size(), 0.0);
  std::vector<std::string> failures(runs.size());
  auto hold_out = [&](std::size_t i) {
    if (runs[i].measured_seconds <= 0) return;  // a busy time alone: no step time to predict
    std::vector<timing_observation> others;
    others.reserve(runs.size() - 1);
    for (std::size_t j = 0; j < runs.size(); ++j)
      if (j != i) others.push_back(runs[j]);
    try {
      const timing_fit fit = fit_timing(others);
      predicted[i] = estimate_op_times(runs[i].ops, runs[i].peak_flops_per_s, runs[i].bandwidth_bytes_per_s, fit.constants).total();
    } catch (const std::exception& e) {  // nothing may leave a thread; rethrown below as the run's failure
      failures[i] = e.what();
    }
  };
  // The fits are independent: run i's thread writes predicted[i] and failures[i] alone.
  const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, runs.size());
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (std::size_t i = t; i < runs.size(); i += threads) hold_out(i);
    });
  for (std::size_t i = 0; i < runs.size(); i += threads) hold_out(i);
  for (auto& th : pool) th.join();
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (!failures[i].empty()) throw input_error(fmt::format("calibrate: {} held out: {}", runs[i].label, failures[i]));
  held_out_fit out;
  out.predicted_seconds = predicted;
  std::vector<double> step_errors;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const bool step = runs[i].measured_seconds > 0;
    out.error_pct.push_back(step ? 100.0 * (predicted[i] - runs[i].measured_seconds) / runs[i].measured_seconds : 0.0);
    if (step) step_errors.push_back(out.error_pct.back());
  }
  const error_summary summary = summarize_errors(step_errors);
  out.max_error_pct = summary.max_pct, out.median_error_pct = summary.median_pct;
  return out;
}

}  // namespace trainplan
