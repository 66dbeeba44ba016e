#pragma once
// Fits data/calibration.json's constants for one GPU from measured runs (`plan calibrate`):
//   CUDA context    the median of the context bytes measured before any tensor is allocated (upper_median:
//                   one of the measurements)
//   cuBLAS workspace the largest workspace measured
//   allocator slack  s minimizing sum (device_peak - tensor_peak - context - workspace - s * tensor_peak)^2
//                    (least squares through the origin), clipped to [0, 1]
//   step time        the stack's roofline constants, planner/measure/timing_fit.hpp
// into the entry of the stack that ran them (its profile's name: the harness's, for `plan validate` reports)
// and reports, run by run, how far the calibrated planner is from what was measured.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"
#include "planner/system/calibration.hpp"
#include "planner/system/gpu_spec.hpp"
#include "planner/time/step_ops.hpp"
#include "planner/measure/timing_fit.hpp"

namespace trainplan {

struct calibration_observation {
  std::string label;                   // which report
  // false for a step time alone (a `plan bench --backend cuda` run): the memory fields are not measured and the
  // context, workspace and slack are fitted on the other runs
  bool memory_measured = true;
  std::uint64_t tensor_peak_bytes = 0;  // tracked tensors at the peak (the inventory's bytes)
  std::uint64_t device_peak_bytes = 0;  // device memory in use at the peak (before the arena, plus its extent)
  std::uint64_t context_bytes = 0;      // device memory in use after context creation, before any tensor
  std::uint64_t workspace_bytes = 0;    // cuBLAS workspace
  double step_seconds = 0;              // measured steady-state step time
  step_ops ops;                         // the planner's ops for this run (planner/time/step_ops.hpp)
  double peak_flops_per_s = 0;          // dense peak for the compute dtype
  double bandwidth_bytes_per_s = 0;     // the GPU's memory bandwidth
};

struct calibration_residual {
  std::string label;
  bool memory_measured = true;  // else the memory fields are 0
  std::uint64_t predicted_device_peak_bytes = 0, measured_device_peak_bytes = 0;
  double predicted_step_seconds = 0, measured_step_seconds = 0;
  double memory_error_pct = 0, time_error_pct = 0;  // (predicted - measured) / measured
};

// The targets for a calibrated GPU: every device peak within 2%, every step time within 10%.
inline constexpr double calibration_memory_target_pct = 2.0, calibration_time_target_pct = 10.0;

struct calibration_fit {
  calibration fitted;
  std::vector<calibration_residual> residuals;
  double max_memory_error_pct = 0, max_time_error_pct = 0;  // absolute values
  bool memory_within_target = false, time_within_target = false;  // the largest errors against the targets
  bool within_targets() const { return memory_within_target && time_within_target; }
};

// `base` supplies what the runs cannot measure (the search's safety margin); `stack`: the profile name whose
// constants the runs measure. Throws input_error when there is nothing to fit (no run, or no run with memory
// figures) or a run's numbers cannot be right.
calibration_fit fit_calibration(const std::vector<calibration_observation>& runs, const calibration& base,
                                std::string_view stack);

// A measured run's planner side: its ops and dense peak, evaluated on `gpu` with `calib`, and the GPU's
// bandwidth. The caller sets what was measured. Throws input_error for a run the planner cannot evaluate.
calibration_observation planned_observation(std::string label, const model_spec& model, const run_config& run,
                                            const gpu_spec& gpu, const calibration& calib);

// The runs' step times as the timing fit takes them (for fit_held_out).
std::vector<timing_observation> timing_observations(const std::vector<calibration_observation>& runs);

}  // namespace trainplan
