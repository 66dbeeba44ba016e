#pragma once
// `plan check`: one measured run of a collector report (scripts/collect_hf.py) predicted with the stack it
// measured, and how far each prediction is from its measurement:
//   tensor peak  the plan's tensors and PyTorch's cuBLAS workspaces: what max_memory_allocated() counts
//   device peak  the file's CUDA context plus max_memory_reserved() as the GPU's memory lets the allocator keep
//                its cache (the replay's budget_reserved_bytes and the workspaces; without a replay, the
//                estimate's peak less its context)
//   step time    the roofline's step; with a profiled run (collect_hf.py --profile) also the roofline's kernel
//                time against the GPU's busy time, and its kernels launched against the ops' count
// A run is within when each error is within its tolerance; a run that ran out of memory is within when the plan
// says it does not fit. A run on several GPUs whose step time is not comparable (the fake process group) is
// checked for memory alone; one whose layout its stack refuses (DTensor tensor parallelism under Hugging Face's
// modules, which no stack models yet) is not predicted, and says why.
#include <cstdint>
#include <optional>
#include <vector>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/measure/measured_runs.hpp"
#include "planner/measure/segment_compare.hpp"

namespace trainplan {

struct check_tolerances {
  double tensor_pct = 3.0, device_pct = 5.0, time_pct = 20.0;
};

struct gpu_busy_check {
  double kernel_seconds = 0;  // the roofline's kernel time: the step's time by op class less the overhead
  double busy_error_pct = 0;  // against measured_gpu_profile::busy_seconds
  double predicted_kernels = 0;  // the ops' launches
  double kernels_error_pct = 0;  // against measured_gpu_profile::kernels
};

struct run_check {
  // Why the run was not predicted: its stack refuses its layout (the stack's own message); empty: predicted, and
  // the rest of this holds.
  std::string not_predicted;
  plan_result plan;
  bool within = true;  // every error within its tolerance (out of memory: the plan says it does not fit)
  double step_error_pct = 0;  // unless out of memory
  bool time_compared = true;  // false: the step time is no measurement of the run planned (measured_run::time_comparable)
  // With memory figures (measured_run::memory_measured, not out of memory):
  double predicted_tensor_bytes = 0, measured_tensor_bytes = 0, tensor_error_pct = 0;
  double predicted_device_bytes = 0, measured_device_bytes = 0, device_error_pct = 0;
  // A run on an allocator edge: what the replay reserves after another run in the same process
  // (reserved_after_another_run), set only where it differs from this run's device peak less the context by at
  // least allocator_edge_fraction: a hint where a report's runs shared a process (--one-process). Not checked.
  std::optional<std::uint64_t> edge_reserved_bytes;
  double edge_device_error_pct = 0;  // the file's context plus edge_reserved_bytes against the measured device peak
  // The segments the replay (PyTorch's default allocator, no capacity) reserves, in the order it makes them:
  // when asked for, or when the run lists its segments; empty without such a replay.
  std::vector<allocator_growth> growth;
  // The run's measured segments against `growth`: when it lists them and the default allocator was replayed.
  std::optional<segment_comparison> segments;
  std::optional<gpu_busy_check> busy;  // a profiled run's
};

// Predicts `r`, a run of `f`, on `gpu` with `calib` (with --framework as it measured), and compares.
// `replay_segments`: make `growth` even where the run lists no segments (plan check --segments-out). Throws
// input_error for a run the planner cannot evaluate.
run_check check_measured_run(const measured_file& f, const measured_run& r, const gpu_spec& gpu, const calibration& calib,
                             const check_tolerances& tolerances, bool replay_segments);

// The largest errors over the runs checked, and whether every run was within.
struct check_totals {
  double worst_tensor_pct = 0, worst_device_pct = 0, worst_time_pct = 0;
  bool all_within = true;
  std::size_t not_predicted = 0;  // runs left out of the verdict (run_check::not_predicted)
  void add(const measured_run& r, const run_check& c);
};

}  // namespace trainplan
