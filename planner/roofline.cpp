#include "planner/roofline.hpp"

#include <algorithm>

namespace trainplan {

double op_device_seconds(const step_op& op, double peak_flops_per_s, double bandwidth_bytes_per_s,
                         const timing_constants& k, bool fp32) {
  double compute = 0;
  if (op.flops > 0) {
    const double e = op.gemm_shaped ? k.gemm_efficiency_at(op.m, op.n, op.k, fp32)
                     : op.cls == op_class::attention ? k.attention_efficiency
                     : fp32                          ? k.fp32_gemm_efficiency
                                                     : k.gemm_efficiency;
    compute = op.flops / (peak_flops_per_s * e);
  }
  const double memory = op.bytes / (bandwidth_bytes_per_s * k.bandwidth_fraction);
  return std::max(compute, memory);
}

op_time_breakdown estimate_op_times(const step_ops& ops, double peak_flops_per_s, double bandwidth_bytes_per_s,
                                    const timing_constants& k) {
  op_time_breakdown t;
  double kernels = 0;
  for (const step_op& op : ops.ops) {
    t.seconds[static_cast<std::size_t>(op.cls)] += op_device_seconds(op, peak_flops_per_s, bandwidth_bytes_per_s, k, ops.fp32_gemms);
    kernels += op.kernels;
  }
  t.seconds[static_cast<std::size_t>(op_class::overhead)] +=
      kernels * k.kernel_seconds + k.step_seconds + ops.foreach_tensors * k.foreach_tensor_seconds;
  return t;
}

}  // namespace trainplan
