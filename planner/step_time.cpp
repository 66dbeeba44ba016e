#include "planner/step_time.hpp"

namespace trainplan {

step_time estimate_step_time(const step_flops& flops, double peak_flops_per_s, const gpu_spec& gpu,
                             const calibration& calib, std::uint64_t optimizer_traffic_bytes,
                             double tokens_per_micro_batch, std::uint64_t replica_gpus, std::uint64_t dp,
                             double offload_seconds, double bubble_fraction) {
  step_time t;
  const double gpus_per_replica = static_cast<double>(replica_gpus);
  t.peak_flops_per_s = peak_flops_per_s;
  t.efficiency = calib.efficiency_at(tokens_per_micro_batch);
  t.compute_seconds = flops.hardware_per_step / gpus_per_replica / (peak_flops_per_s * t.efficiency) * (1.0 + bubble_fraction);
  t.optimizer_seconds = static_cast<double>(optimizer_traffic_bytes) / gpu.memory_bandwidth_bytes_per_s;
  t.offload_seconds = offload_seconds;
  t.step_seconds = t.compute_seconds + t.optimizer_seconds + t.offload_seconds;
  t.tokens_per_second = flops.tokens_per_step * static_cast<double>(dp) / t.step_seconds;
  t.mfu = flops.model_per_step / gpus_per_replica / (t.step_seconds * peak_flops_per_s);
  t.hfu = flops.hardware_per_step / gpus_per_replica / (t.step_seconds * peak_flops_per_s);
  return t;
}

}  // namespace trainplan
