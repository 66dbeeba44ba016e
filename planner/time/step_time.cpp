#include "planner/time/step_time.hpp"

namespace trainplan {

step_time estimate_step_time(const step_flops& flops, const step_ops& ops, double peak_flops_per_s,
                             double bandwidth_bytes_per_s, const timing_constants& constants,
                             std::uint64_t replica_gpus, std::uint64_t dp, double offload_seconds,
                             double bubble_fraction, const comm_time* communication) {
  step_time t;
  const double gpus_per_replica = static_cast<double>(replica_gpus);
  t.peak_flops_per_s = peak_flops_per_s;
  t.breakdown = estimate_op_times(ops, peak_flops_per_s, bandwidth_bytes_per_s, constants);
  t.optimizer_seconds = t.breakdown.seconds[static_cast<std::size_t>(op_class::optimizer)];
  t.compute_seconds = (t.breakdown.total() - t.optimizer_seconds) * (1.0 + bubble_fraction);
  t.offload_seconds = offload_seconds;
  t.step_seconds = t.compute_seconds + t.optimizer_seconds + t.offload_seconds;
  if (communication) {
    t.communication = *communication;
    t.communication_modelled = true;
    t.step_seconds += communication->exposed_seconds + communication->slowdown_seconds;
  }
  t.tokens_per_second = flops.tokens_per_step * static_cast<double>(dp) / t.step_seconds;
  t.mfu = flops.model_per_step / gpus_per_replica / (t.step_seconds * peak_flops_per_s);
  t.hfu = flops.hardware_per_step / gpus_per_replica / (t.step_seconds * peak_flops_per_s);
  return t;
}

}  // namespace trainplan
