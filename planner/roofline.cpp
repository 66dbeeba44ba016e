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

// With the phases' device times D and host times H (the optimizer's host work split into its per-tensor
// Python preamble P, which runs before any of its kernels, and its launches), a step ends no earlier than
// the host reaching each phase boundary followed by the device's work from there on:
//   T = step + max(D_F + D_B + D_O, H_F + D_B + D_O, H_F + H_B + P + D_O, H_F + H_B + P + H_O).
// Each term is a schedule the stream cannot beat (the device cannot start a phase's kernels before the host
// issues them); taking the largest assumes each phase is uniformly host- or device-bound within itself.
op_time_breakdown estimate_op_times(const step_ops& ops, double peak_flops_per_s, double bandwidth_bytes_per_s,
                                    const timing_constants& k) {
  op_time_breakdown t;
  double forward = 0, backward = 0, optimizer = 0;  // device seconds by phase, gaps excluded
  // op_device_seconds with the divisions hoisted out of the loop (a sweep runs this per configuration):
  // seconds per FLOP and per byte, and 1 / g(x) = 1 + half / x for a GEMM's shape.
  const double per_flop = 1 / (peak_flops_per_s * (ops.fp32_gemms ? k.fp32_gemm_efficiency : k.gemm_efficiency));
  const double per_attention_flop = 1 / (peak_flops_per_s * k.attention_efficiency);
  const double per_byte = 1 / (bandwidth_bytes_per_s * k.bandwidth_fraction);
  const double half = k.gemm_half_dim;
  for (const step_op& op : ops.ops) {
    double compute = 0;
    if (op.flops > 0) {
      compute = op.flops * (op.cls == op_class::attention && !op.gemm_shaped ? per_attention_flop : per_flop);
      if (op.gemm_shaped && half > 0) compute *= (1 + half / op.m) * (1 + half / op.n) * (1 + half / op.k);
    }
    const double s = std::max(compute, op.bytes * per_byte);
    t.seconds[static_cast<std::size_t>(op.cls)] += s;
    if (op.cls == op_class::optimizer) {
      optimizer += s;
    } else {
      forward += s * op.forward_share;
      backward += s * (1 - op.forward_share);
    }
  }
  const step_launches& n = ops.launches;
  const double device_f = forward + n.forward * k.kernel_seconds;
  const double device_b = backward + (n.recompute + n.backward) * k.kernel_seconds;
  const double device_o = optimizer + n.optimizer * k.kernel_seconds;
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
