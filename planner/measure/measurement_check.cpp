// One measured run predicted and compared (measurement_check.hpp): step time, tensor and device peaks, the
// run after another in the same process, the replay's segments and a profiled run's GPU busy time.
#include "planner/measure/measurement_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/model/model_facts.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

double error_pct(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

// The segments the replay reserves for a run, in the order it makes them (none without a replay of PyTorch's
// default allocator: with expandable segments growth is pages mapped, not segments). A second replay, with no
// capacity: the plan's own (in the GPU's memory) keeps no growth, as sweeps need none; the two are the same
// replay unless the plan's ran short and freed its cache (its allocator counts say so).
std::vector<allocator_growth> replayed_segments(const measured_run& r, const plan_result& p) {
  std::vector<allocator_growth> growth;
  if (p.allocator && !r.run.expandable_segments) replay_schedule(plan_allocator_schedule(p, describe_model(r.model)), &growth);
  return growth;
}

}  // namespace

run_check check_measured_run(const measured_file& f, const measured_run& r, const gpu_spec& gpu, const calibration& calib,
                             const check_tolerances& tolerances, bool replay_segments) {
  run_check c;
  // A layout its stack may not model, or a compiled run (--compile) in layers the stack does not model compiled:
  // said, not predicted (any other one-GPU run's refusal is an error).
  if (r.layout || r.compiled) {
    try {
      c.plan = evaluate_plan(r.model, r.run, gpu, calib);
    } catch (const input_error& e) {
      // DTensor's parallelize_module over the Hugging Face modules: Megatron-LM's tensor parallelism runs other
      // layers and kernels, so even a stack that takes --tp would mis-predict it.
      c.not_predicted = r.layout && r.layout->mode == "tp"
                            ? fmt::format("DTensor tensor parallelism over Hugging Face's modules, which no stack models "
                                          "yet; its stack says: {}", e.what())
                            : std::string(e.what());
      return c;
    }
  } else {
    c.plan = evaluate_plan(r.model, r.run, gpu, calib);
  }
  const plan_result& p = c.plan;
  if (r.out_of_memory) {
    c.within = !p.fits;
    return c;
  }
  c.time_compared = r.time_comparable;
  if (c.time_compared) {
    c.step_error_pct = error_pct(p.time.step_seconds, r.step_seconds);
    c.within = std::abs(c.step_error_pct) <= tolerances.time_pct;
  }
  if (!r.memory_measured) return c;  // a step time alone
  // What memory_allocated counts: the tensors and PyTorch's cuBLAS workspaces.
  c.predicted_tensor_bytes = static_cast<double>(p.tensor_peak_bytes + p.overhead.cublas_workspace_bytes);
  c.measured_tensor_bytes = static_cast<double>(r.alloc_peak_bytes);
  // max_memory_reserved() as the GPU's memory lets the allocator keep its cache (the same as the peak unless it
  // runs short there, when the peak is the least memory the run completes in)
  c.predicted_device_bytes = static_cast<double>(
      f.context_bytes + (p.allocator ? p.allocator->budget_reserved_bytes + p.overhead.cublas_workspace_bytes
                                     : p.peak_bytes - p.overhead.cuda_context_bytes));  // not replayed: the estimate
  c.measured_device_bytes = static_cast<double>(f.context_bytes + r.reserved_peak_bytes);
  c.tensor_error_pct = error_pct(c.predicted_tensor_bytes, c.measured_tensor_bytes);
  c.device_error_pct = error_pct(c.predicted_device_bytes, c.measured_device_bytes);
  c.within = c.within && std::abs(c.tensor_error_pct) <= tolerances.tensor_pct &&
             std::abs(c.device_error_pct) <= tolerances.device_pct;
  const double reserved = c.predicted_device_bytes - f.context_bytes;
  if (const std::optional<std::uint64_t> warm = reserved_after_another_run(p, describe_model(r.model));
      warm && std::abs(static_cast<double>(*warm) - reserved) >= allocator_edge_fraction * reserved) {
    c.edge_reserved_bytes = warm;
    c.edge_device_error_pct = error_pct(static_cast<double>(f.context_bytes + *warm), c.measured_device_bytes);
  }
  if (!r.segments.empty() || replay_segments) c.growth = replayed_segments(r, p);
  if (!r.segments.empty() && p.allocator && !r.run.expandable_segments) c.segments = compare_segments(r.segments, c.growth);
  if (r.gpu_profile) {
    gpu_busy_check b;
    b.kernel_seconds = p.time.breakdown.kernel_seconds();
    b.busy_error_pct = error_pct(b.kernel_seconds, r.gpu_profile->busy_seconds);
    b.predicted_kernels = p.ops.launches.total();
    b.kernels_error_pct = error_pct(b.predicted_kernels, static_cast<double>(r.gpu_profile->kernels));
    c.busy = b;
  }
  return c;
}

void check_totals::add(const measured_run& r, const run_check& c) {
  if (!c.not_predicted.empty()) {
    ++not_predicted;
    return;
  }
  all_within = all_within && c.within;
  if (r.out_of_memory) return;
  if (c.time_compared) worst_time_pct = std::max(worst_time_pct, std::abs(c.step_error_pct));
  if (!r.memory_measured) return;
  worst_tensor_pct = std::max(worst_tensor_pct, std::abs(c.tensor_error_pct));
  worst_device_pct = std::max(worst_device_pct, std::abs(c.device_error_pct));
}

}  // namespace trainplan
