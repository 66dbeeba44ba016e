#include "planner/calibration_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "planner/input_error.hpp"

namespace trainplan {

calibration_fit fit_calibration(const std::vector<calibration_observation>& runs, const calibration& base) {
  if (runs.empty()) throw input_error("calibrate: no measured runs to fit");
  // Inputs whose sums would pass 64 bits, or that make an error percentage infinite, are refused.
  constexpr std::uint64_t max_bytes = 1ull << 50;  // 1 PiB, as for a GPU's memory in gpus.json
  for (const auto& r : runs) {
    if (r.device_peak_bytes == 0 || r.device_peak_bytes > max_bytes || r.tensor_peak_bytes > max_bytes ||
        r.context_bytes > max_bytes || r.workspace_bytes > max_bytes)
      throw input_error(fmt::format("calibrate: {}: byte counts must be between 1 and 2^50 (1 PiB)", r.label));
    if (!(std::isfinite(r.step_seconds) && r.step_seconds > 0))
      throw input_error(fmt::format("calibrate: {}: step_seconds must be a positive number", r.label));
  }
  calibration_fit out;
  calibration& c = out.fitted;
  c = base;

  std::vector<std::uint64_t> contexts;
  for (const auto& r : runs) contexts.push_back(r.context_bytes);
  std::sort(contexts.begin(), contexts.end());
  c.cuda_context_bytes = contexts[contexts.size() / 2];
  c.cublas_workspace_bytes = 0;
  for (const auto& r : runs) c.cublas_workspace_bytes = std::max(c.cublas_workspace_bytes, r.workspace_bytes);

  // Allocator slack: least squares through the origin.
  double xy = 0, xx = 0;
  for (const auto& r : runs) {
    const double x = static_cast<double>(r.tensor_peak_bytes);
    const double y = static_cast<double>(r.device_peak_bytes) - x - static_cast<double>(c.cuda_context_bytes) -
                     static_cast<double>(c.cublas_workspace_bytes);
    xy += x * y;
    xx += x * x;
  }
  c.allocator_slack_fraction = xx > 0 ? std::clamp(xy / xx, 0.0, 1.0) : 0.0;

  // Efficiency against GEMM size.
  std::vector<std::pair<double, double>> points;  // (1/n, 1/e)
  std::set<double> sizes;
  double mean_efficiency = 0;
  for (const auto& r : runs) {
    const double compute = r.step_seconds - r.optimizer_seconds;
    if (!(compute > 0) || !(r.peak_flops_per_s > 0) || !(r.hardware_flops > 0) || !(r.tokens_per_micro_batch > 0))
      throw input_error(fmt::format("calibrate: {}: step time {} s leaves no time for compute (optimizer alone {} s)",
                                    r.label, r.step_seconds, r.optimizer_seconds));
    const double e = r.hardware_flops / (compute * r.peak_flops_per_s);
    mean_efficiency += e / runs.size();
    points.emplace_back(1.0 / r.tokens_per_micro_batch, 1.0 / e);
    sizes.insert(r.tokens_per_micro_batch);
  }
  c.achieved_efficiency = std::min(mean_efficiency, 1.0);
  c.efficiency_half_tokens = 0;
  if (sizes.size() >= 2) {
    double mx = 0, my = 0;
    for (const auto& [x, y] : points) mx += x / points.size(), my += y / points.size();
    double sxy = 0, sxx = 0;
    for (const auto& [x, y] : points) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
    const double slope = sxy / sxx, intercept = my - slope * mx;
    if (intercept > 0 && slope > 0 && 1.0 / intercept <= 1.0) {
      c.achieved_efficiency = 1.0 / intercept;
      c.efficiency_half_tokens = slope / intercept;
    }
  }

  for (const auto& r : runs) {
    calibration_residual res;
    res.label = r.label;
    res.measured_device_peak_bytes = r.device_peak_bytes;
    // Each term is at most 2^50 (checked above; the slack fraction is at most 1): the sum stays exact.
    res.predicted_device_peak_bytes =
        r.tensor_peak_bytes +
        static_cast<std::uint64_t>(std::floor(static_cast<double>(r.tensor_peak_bytes) * c.allocator_slack_fraction)) +
        c.cuda_context_bytes + c.cublas_workspace_bytes;
    res.measured_step_seconds = r.step_seconds;
    res.predicted_step_seconds =
        r.hardware_flops / (r.peak_flops_per_s * c.efficiency_at(r.tokens_per_micro_batch)) + r.optimizer_seconds;
    res.memory_error_pct = 100.0 * (static_cast<double>(res.predicted_device_peak_bytes) - static_cast<double>(r.device_peak_bytes)) /
                           static_cast<double>(r.device_peak_bytes);
    res.time_error_pct = 100.0 * (res.predicted_step_seconds - r.step_seconds) / r.step_seconds;
    out.max_memory_error_pct = std::max(out.max_memory_error_pct, std::abs(res.memory_error_pct));
    out.max_time_error_pct = std::max(out.max_time_error_pct, std::abs(res.time_error_pct));
    out.residuals.push_back(res);
  }
  return out;
}

}  // namespace trainplan
