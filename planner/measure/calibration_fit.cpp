// The harness's calibration fit (calibration_fit.hpp): context and workspace from the measurements, the
// allocator slack by least squares through the origin, the roofline's constants by timing_fit.hpp, and each run
// predicted again with the fitted constants.
#include "planner/measure/calibration_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/evaluate/plan.hpp"
#include "planner/measure/median.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

std::vector<timing_observation> timing_observations(const std::vector<calibration_observation>& runs) {
  std::vector<timing_observation> timed;
  for (const auto& r : runs) timed.push_back({r.label, r.ops, r.peak_flops_per_s, r.bandwidth_bytes_per_s, r.step_seconds});
  return timed;
}

calibration_fit fit_calibration(const std::vector<calibration_observation>& runs, const calibration& base,
                                std::string_view stack) {
  if (runs.empty()) throw input_error("calibrate: no measured runs to fit");
  // Inputs whose sums would pass 64 bits, or that make an error percentage infinite, are refused.
  constexpr std::uint64_t max_bytes = 1ull << 50;  // 1 PiB, as for a GPU's memory in gpus.json
  for (const auto& r : runs) {
    const bool bytes_out_of_range = r.device_peak_bytes == 0 || r.device_peak_bytes > max_bytes ||
                                    r.tensor_peak_bytes > max_bytes || r.context_bytes > max_bytes || r.workspace_bytes > max_bytes;
    if (r.memory_measured && bytes_out_of_range)
      throw input_error(fmt::format("calibrate: {}: byte counts must be between 1 and 2^50 (1 PiB)", r.label));
    if (!(std::isfinite(r.step_seconds) && r.step_seconds > 0))
      throw input_error(fmt::format("calibrate: {}: step_seconds must be a positive number", r.label));
  }
  calibration_fit out;
  calibration& c = out.fitted;
  c = base;
  stack_calibration& own = c.stack(stack);

  std::vector<const calibration_observation*> measured;  // the runs with memory figures
  for (const auto& r : runs)
    if (r.memory_measured) measured.push_back(&r);
  if (measured.empty()) throw input_error("calibrate: no run with memory figures (a validation report) to fit the context on");
  std::vector<std::uint64_t> contexts;
  for (const auto* r : measured) contexts.push_back(r->context_bytes);
  own.cuda_context_bytes = upper_median(contexts);
  c.cublas_workspace_bytes = 0;
  for (const auto* r : measured) c.cublas_workspace_bytes = std::max(c.cublas_workspace_bytes, r->workspace_bytes);

  // Allocator slack: least squares through the origin.
  double xy = 0, xx = 0;
  for (const auto* r : measured) {
    const double x = static_cast<double>(r->tensor_peak_bytes);
    const double y = static_cast<double>(r->device_peak_bytes) - x - static_cast<double>(*own.cuda_context_bytes) -
                     static_cast<double>(c.cublas_workspace_bytes);
    xy += x * y;
    xx += x * x;
  }
  own.allocator_slack_fraction = xx > 0 ? std::clamp(xy / xx, 0.0, 1.0) : 0.0;

  // Step time: the harness's roofline constants.
  const timing_fit time_fit = fit_timing(timing_observations(runs));
  own.timing = time_fit.constants;

  std::size_t run_index = 0;
  for (const auto& r : runs) {
    calibration_residual res;
    res.label = r.label;
    res.measured_step_seconds = r.step_seconds;
    res.predicted_step_seconds = time_fit.predicted_seconds[run_index++];
    res.time_error_pct = 100.0 * (res.predicted_step_seconds - r.step_seconds) / r.step_seconds;
    out.max_time_error_pct = std::max(out.max_time_error_pct, std::abs(res.time_error_pct));
    res.memory_measured = r.memory_measured;
    if (!r.memory_measured) {
      out.residuals.push_back(res);
      continue;
    }
    res.measured_device_peak_bytes = r.device_peak_bytes;
    // Each term is at most 2^50 (checked above; the slack fraction is at most 1): the sum stays exact.
    res.predicted_device_peak_bytes =
        r.tensor_peak_bytes +
        static_cast<std::uint64_t>(std::floor(static_cast<double>(r.tensor_peak_bytes) * *own.allocator_slack_fraction)) +
        *own.cuda_context_bytes + c.cublas_workspace_bytes;
    res.memory_error_pct = 100.0 * (static_cast<double>(res.predicted_device_peak_bytes) - static_cast<double>(r.device_peak_bytes)) /
                           static_cast<double>(r.device_peak_bytes);
    out.max_memory_error_pct = std::max(out.max_memory_error_pct, std::abs(res.memory_error_pct));
    out.residuals.push_back(res);
  }
  out.memory_within_target = out.max_memory_error_pct <= calibration_memory_target_pct;
  out.time_within_target = out.max_time_error_pct <= calibration_time_target_pct;
  return out;
}

calibration_observation planned_observation(std::string label, const model_spec& model, const run_config& run,
                                            const gpu_spec& gpu, const calibration& calib) {
  const plan_result p = evaluate_plan(model, run, gpu, calib);
  calibration_observation o;
  o.label = std::move(label);
  o.ops = p.ops;
  o.peak_flops_per_s = p.time.peak_flops_per_s;
  o.bandwidth_bytes_per_s = gpu.memory_bandwidth_bytes_per_s;
  return o;
}

}  // namespace trainplan
