#include "planner/roofline.hpp"

#include <algorithm>

namespace trainplan {

phase_seconds device_seconds_by_phase(const step_ops& ops, const roofline_rates& rates,
                                      std::array<double, op_class_count>* by_class) {
  phase_seconds d;
  for (const step_op& op : ops.ops) {
    const double s = rates.seconds(op);
    if (by_class) (*by_class)[static_cast<std::size_t>(op.cls)] += s;
    if (op.cls == op_class::optimizer) {
      d.optimizer += s;
    } else {
      d.forward += s * op.forward_share;
      d.backward += s * (1 - op.forward_share);
    }
  }
  return d;
}

// With the phases' device times D and host times H (the optimizer's host work split into its per-tensor
// Python preamble P, which runs before any of its kernels, and its launches), a step ends no earlier than
// the host reaching each phase boundary followed by the device's work from there on:
//   T = step + max(D_F + D_B + D_O, H_F + D_B + D_O, H_F + H_B + P + D_O, H_F + H_B + P + H_O).
// Each term is a schedule the stream cannot beat (the device cannot start a phase's kernels before the host
// issues them); taking the largest assumes each phase is uniformly host- or device-bound within itself.
op_time_breakdown estimate_op_times(const step_ops& ops, double peak_flops_per_s, double bandwidth_bytes_per_s,
                                    const timing_constants& k) {
  op_time_breakdown t;
  const phase_seconds d = device_seconds_by_phase(
      ops, roofline_rates(peak_flops_per_s, bandwidth_bytes_per_s, k, ops.fp32_gemms), &t.seconds);
  const step_launches& n = ops.launches;
  const double device_f = d.forward + n.forward * k.kernel_seconds;
  const double device_b = d.backward + (n.recompute + n.backward) * k.kernel_seconds;
  const double device_o = d.optimizer + n.optimizer * k.kernel_seconds;
  const double host_f = n.forward * k.forward_kernel_seconds;
  const double host_b = n.recompute * k.forward_kernel_seconds + n.backward * k.backward_kernel_seconds;
  const double host_p = ops.foreach_tensors * k.foreach_tensor_seconds;
  const double host_o = n.optimizer * k.backward_kernel_seconds;
  const double step = k.step_seconds + std::max({device_f + device_b + device_o, host_f + device_b + device_o,
                                                 host_f + host_b + host_p + device_o, host_f + host_b + host_p + host_o});
  t.host_seconds = k.step_seconds + host_f + host_b + host_p + host_o;
  t.device_seconds = device_f + device_b + device_o;
  double kernels = 0;
  for (double s : t.seconds) kernels += s;
  t.seconds[static_cast<std::size_t>(op_class::overhead)] = std::max(0.0, step - kernels);
  return t;
}

}  // namespace trainplan
