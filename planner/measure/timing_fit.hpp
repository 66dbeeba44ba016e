#pragma once
// Fits one framework's roofline constants (planner/time/roofline.hpp) on one GPU from measured step times
// (`plan calibrate`). The device-side constants (GEMM efficiency and its half dimension, attention
// efficiency, bandwidth fraction) are searched on a grid; for each grid point the others (the gap per
// kernel, the host's cost per step, per forward and backward launch and per foreach tensor), on which each
// of the step's schedules is linear, are solved by non-negative least squares, alternating with the choice
// of each run's longest schedule. The objective is the sum of squared relative errors, so a 30 ms run weighs as much as a 3 s one;
// a profiled run adds its kernel time's squared relative error against the GPU's busy time.
// Every run shares the same constants: nothing is fitted per run.
#include <string>
#include <vector>

#include "planner/time/roofline.hpp"
#include "planner/time/step_ops.hpp"

namespace trainplan {

struct timing_observation {
  std::string label;
  step_ops ops;                     // the planner's ops for the measured configuration
  double peak_flops_per_s = 0;      // dense peak for its compute dtype
  double bandwidth_bytes_per_s = 0;
  // Steady-state step time; 0 for a busy time alone (a profiled run of another host: its device side only).
  double measured_seconds = 0;
  // The GPU's busy time in a step (collect_hf.py --profile: the union of its kernels' intervals), 0 when not
  // profiled. It measures the device side alone, whatever the host does: the fit matches the roofline's kernel
  // time to it as well as the step time, which pins the device constants apart from the host's.
  double busy_seconds = 0;
};

struct timing_fit {
  timing_constants constants;
  std::vector<double> predicted_seconds;  // one per observation, in order
  double max_error_pct = 0;               // |predicted - measured| / measured, largest
  double median_error_pct = 0;
};

// Throws input_error without a step time among the observations, or with a step time, busy time, peak or
// bandwidth that is not a number the fit can take.
timing_fit fit_timing(const std::vector<timing_observation>& runs);

// Leave-one-out cross-validation: run i predicted by the constants fitted on every other run, i.e. how the
// fit does on a configuration it has not seen (fit_timing's residuals are the runs it was fitted on). One
// fit per run, spread over the machine's cores; a busy time alone is never held out, only fitted. Throws
// input_error with fewer than two runs.
struct held_out_fit {
  std::vector<double> predicted_seconds;  // one per observation, in order (0 for a busy time alone)
  std::vector<double> error_pct;          // (predicted - measured) / measured, signed (0 for a busy time alone)
  double max_error_pct = 0;               // of |error|
  double median_error_pct = 0;
};
held_out_fit fit_held_out(const std::vector<timing_observation>& runs);

}  // namespace trainplan
