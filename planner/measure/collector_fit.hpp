#pragma once
// Fits a training stack's constants on one GPU from its collector's reports (scripts/collect_hf.py; `plan
// calibrate --framework NAME`), in two steps, so that a caller can say what the first set before the second runs:
//   CUDA context  the reports measure it directly (their env lines): the median of the files' (upper_median,
//                 as calibration_fit.hpp's), written into the stack's entry
//   step time     the stack's roofline constants (planner/measure/timing_fit.hpp) over every measured step
//                 time, each run predicted with the context just fitted, and the GPU busy times of profiled runs;
//                 a `device_only` file's profiled runs (another host's, the same GPU and software) join through
//                 their busy times alone: the GPU's busy time is the device's, whatever drives it; the step
//                 time is not
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "planner/measure/measured_runs.hpp"
#include "planner/measure/timing_fit.hpp"
#include "planner/system/calibration.hpp"
#include "planner/system/gpu_spec.hpp"

namespace trainplan {

struct collector_context_fit {
  calibration fitted;            // `base` with the stack's CUDA context set
  std::uint64_t before_bytes = 0;  // the stack's context in `base`
  std::uint64_t context_bytes = 0;
};

// Throws input_error without a file.
collector_context_fit fit_collector_context(const std::vector<measured_file>& files, const calibration& base,
                                            std::string_view stack);

struct collector_timing_fit {
  calibration fitted;  // `base` with the stack's timing constants set
  // The fitted runs: every measured step time (not out of memory) of `files`, with its busy time where
  // profiled, then every profiled run of `device_only`, labelled "<id> (busy)", with its busy time alone.
  std::vector<timing_observation> timed;
  std::size_t device_only_runs = 0;
  timing_fit timing;
  std::size_t step_time_runs() const { return timed.size() - device_only_runs; }
};

// Throws input_error when `device_only` is given without a profiled run in it (collect_hf.py --profile), and
// as fit_timing does.
collector_timing_fit fit_collector_timing(const std::vector<measured_file>& files,
                                          const std::vector<measured_file>& device_only, const gpu_spec& gpu,
                                          const calibration& base, std::string_view stack);

}  // namespace trainplan
