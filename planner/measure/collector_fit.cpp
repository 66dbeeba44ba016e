// A collector's calibration fit (collector_fit.hpp): the stack's CUDA context from the reports' env lines
// (upper_median), then its roofline constants over the measured steps predicted with that context.
#include "planner/measure/collector_fit.hpp"

#include "planner/evaluate/plan.hpp"
#include "planner/measure/median.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

collector_context_fit fit_collector_context(const std::vector<measured_file>& files, const calibration& base,
                                            std::string_view stack) {
  if (files.empty()) throw input_error("calibrate: no collector reports to fit");
  std::vector<std::uint64_t> contexts;
  for (const measured_file& f : files) contexts.push_back(f.context_bytes);
  collector_context_fit out;
  out.fitted = base;
  out.before_bytes = base.context_bytes(stack);
  out.context_bytes = upper_median(contexts);
  out.fitted.stack(stack).cuda_context_bytes = out.context_bytes;
  return out;
}

collector_timing_fit fit_collector_timing(const std::vector<measured_file>& files,
                                          const std::vector<measured_file>& device_only, const gpu_spec& gpu,
                                          const calibration& base, std::string_view stack) {
  collector_timing_fit out;
  out.fitted = base;
  for (const measured_file& f : files)
    for (const measured_run& r : f.runs) {
      if (r.out_of_memory) continue;
      const plan_result p = evaluate_plan(r.model, r.run, gpu, base, {timeline_detail::peak});
      out.timed.push_back({r.id, p.ops, p.time.peak_flops_per_s, gpu.memory_bandwidth_bytes_per_s, r.step_seconds,
                           r.gpu_profile ? r.gpu_profile->busy_seconds : 0.0});
    }
  for (const measured_file& f : device_only)
    for (const measured_run& r : f.runs) {
      if (r.out_of_memory || !r.gpu_profile) continue;
      const plan_result p = evaluate_plan(r.model, r.run, gpu, base, {timeline_detail::peak});
      out.timed.push_back({r.id + " (busy)", p.ops, p.time.peak_flops_per_s, gpu.memory_bandwidth_bytes_per_s, 0.0,
                           r.gpu_profile->busy_seconds});
      ++out.device_only_runs;
    }
  if (!device_only.empty() && out.device_only_runs == 0)
    throw input_error("calibrate --device-only: no profiled run (collect_hf.py --profile) in those reports");
  out.timing = fit_timing(out.timed);
  out.fitted.stack(stack).timing = out.timing.constants;
  return out;
}

}  // namespace trainplan
