#pragma once
// Runs the harness on a configuration and compares what it measured with what the planner predicted:
// the peak and its phase, every named buffer's size, the bytes of each component at the peak, and the
// live bytes of every event of the timeline.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/memory/inventory.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"
#include "validate/training_run.hpp"

namespace trainplan::validate {

struct tensor_comparison {
  std::string name;                 // planner template: "layer{}.attn.softmax"
  std::uint64_t predicted_bytes = 0;  // one instance
  std::uint64_t measured_bytes = 0;
  bool predicted = false, measured = false;
  bool matches() const { return predicted && measured && predicted_bytes == measured_bytes; }
};

struct component_comparison {
  std::string component;            // planner category name, or "unpredicted"
  std::uint64_t predicted_bytes = 0;  // at the predicted peak
  std::uint64_t measured_bytes = 0;   // at the measured peak
};

struct timeline_row {
  std::string phase;                // "step 2, micro-batch 1, backward layer 0"
  std::uint64_t predicted_bytes = 0, measured_bytes = 0;
};

// What only a GPU shows (the CUDA backend).
struct device_measurements {
  std::string name;                      // the device's own name
  std::uint64_t context_bytes = 0;       // in use before the first buffer (CUDA context, loaded kernels)
  std::uint64_t workspace_bytes = 0;     // the cuBLAS workspace set on the handle
  std::uint64_t device_peak_bytes = 0;   // the most in use, right after any allocation (cudaMemGetInfo)
  double step_seconds = 0;               // mean wall time of the steps after the first, synchronized
};

// On a device, steps after the requested ones are timed until the steady steps add up to this long, or
// this many are timed: the H100 suite's two timed steps of 15 to 70 ms left runs of the same work 7-20%
// apart (GPT-2 and TinyLlama "selective flash", which recompute nothing more than "none flash").
constexpr double device_timing_min_seconds = 0.5;
constexpr int device_timing_max_steps = 20;

struct validation_result {
  std::string backend = "cpu";
  std::optional<device_measurements> device;
  int steps = 0;
  std::uint64_t predicted_peak_bytes = 0, measured_peak_bytes = 0;
  std::string predicted_peak_phase, measured_peak_phase;
  double delta_pct = 0;             // (measured - predicted) / predicted * 100
  std::vector<tensor_comparison> tensors;
  std::vector<component_comparison> components;
  std::vector<timeline_row> timeline;
  std::vector<step_record> steps_run;
  double seconds = 0;               // wall time of the harness steps

  bool tensors_match() const;
  // Within tolerance: |delta_pct| <= tolerance_pct and every named buffer has its predicted size.
  bool passed(double tolerance_pct) const;
};

// Throws input_error for configurations the harness does not run, out_of_memory when the backend runs
// out. `device` (when not null) is filled in from the backend: name, context and workspace bytes; the step
// time then comes from at least device_timing_min_seconds of steady steps (at most device_timing_max_steps).
validation_result validate_on(const kernels::kernel_ops& ops, const model_spec& m, const run_config& run,
                              const training_options& options, const device_measurements* device = nullptr);

inline validation_result validate_on_cpu(const model_spec& m, const run_config& run, const training_options& options) {
  return validate_on(kernels::cpu_kernel_ops(), m, run, options);
}

// Compares a finished run with the planner (exposed for tests).
validation_result compare_with_planner(const training_run& run);

}  // namespace trainplan::validate
