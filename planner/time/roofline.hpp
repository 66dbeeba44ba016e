#pragma once
// Step time from the operations: each op takes the longer of its FLOPs at the GEMM efficiency for
// its shape and its bytes at the achieved memory bandwidth (Williams et al. 2009, "Roofline"), plus a gap
// per kernel launched. The host issues kernels asynchronously (CUDA streams: a launch returns before the
// kernel runs), so the GPU runs behind the host and waits for it only where the host is slower: PyTorch
// eager's Python dispatch of a small model's forward, or a checkpointed layer's forward rerun in backward.
// The step takes the longest of the ways the two can meet at a phase boundary (each micro-batch's forward
// and backward in turn, GradScaler's checks, the optimizer), plus a fixed host cost before its first kernel;
// a host that waits for the device (GradScaler's .item() before a foreach optimizer) starts the optimizer's
// Python work only when the device is done. The constants are per GPU and framework (data/calibration.json,
// `plan calibrate`).
#include <array>

#include "planner/system/timing_constants.hpp"
#include "planner/time/step_ops.hpp"

namespace trainplan {

struct op_time_breakdown {
  // By op_class: the kernels' device time; overhead is the rest of the step, the gaps between kernels and
  // the time the GPU waits for the host.
  std::array<double, op_class_count> seconds{};
  double host_seconds = 0;    // the host's work alone: were the GPU infinitely fast, the step would take this
  double device_seconds = 0;  // the GPU's work alone (kernels and gaps) after the host's fixed step cost
  double host_work_seconds = 0;  // host_seconds less the host's fixed cost per step (timing_constants::step_seconds)
  // Where the host's work alone outlasts the GPU's, the step is the host's: more work per kernel (a larger
  // micro-batch) costs the GPU's idle time first.
  bool host_bound() const { return host_work_seconds > device_seconds; }
  double total() const {
    double t = 0;
    for (double s : seconds) t += s;
    return t;
  }
  // The kernels' device time alone (every class but the overhead): what a profiler's GPU busy time measures.
  double kernel_seconds() const { return total() - seconds[static_cast<std::size_t>(op_class::overhead)]; }
};

// The roofline's rates for one GPU, framework and step, the divisions done once (a sweep times every
// configuration's ops): seconds per FLOP and per byte; a GEMM's 1 / g(x) = 1 + gemm_half_dim / x.
// fp32: the step's GEMMs run in fp32 on the CUDA cores (step_ops::fp32_gemms).
struct roofline_rates {
  // Fused attention's FLOPs count the whole s x s square (planner/time/flops.hpp), and attention_efficiency is
  // what causal kernels reach on that count, computing only the tiles on and below the diagonal (FlashAttention,
  // cuDNN and the memory-efficient kernel skip the rest under is_causal): about half the square. A kernel
  // handed a mask instead (step_op::every_tile) computes every tile, twice the causal kernel's work for the
  // same counted FLOPs.
  static constexpr double causal_tiles_per_square = 2;
  double per_flop, per_attention_flop, per_byte, half_dim;
  roofline_rates(double peak_flops_per_s, double bandwidth_bytes_per_s, const timing_constants& k, bool fp32)
      : per_flop(1 / (peak_flops_per_s * (fp32 ? k.fp32_gemm_efficiency : k.gemm_efficiency))),
        per_attention_flop(1 / (peak_flops_per_s * k.attention_efficiency)),
        per_byte(1 / (bandwidth_bytes_per_s * k.bandwidth_fraction)),
        half_dim(k.gemm_half_dim) {}

  // The device-side time of one op (no launch cost): the roofline's max of compute and memory time.
  double seconds(const step_op& op) const {
    double compute = 0;
    if (op.flops > 0) {
      compute = op.flops * (op.cls == op_class::attention && !op.gemm_shaped
                                ? per_attention_flop * (op.every_tile ? causal_tiles_per_square : 1)
                                : per_flop);
      if (op.gemm_shaped && half_dim > 0) compute *= (1 + half_dim / op.m) * (1 + half_dim / op.n) * (1 + half_dim / op.k);
    }
    const double memory = op.bytes * per_byte;
    return compute > memory ? compute : memory;
  }
};

inline double op_device_seconds(const step_op& op, double peak_flops_per_s, double bandwidth_bytes_per_s,
                                const timing_constants& k, bool fp32 = false) {
  return roofline_rates(peak_flops_per_s, bandwidth_bytes_per_s, k, fp32).seconds(op);
}

// The ops' device seconds (no launch gaps) by the step's phase: the first forward, backward (recomputation
// included), the GradScaler's ops and the optimizer; by op class too when by_class is given.
struct phase_seconds {
  double forward = 0, backward = 0, scaler = 0, optimizer = 0;
};
phase_seconds device_seconds_by_phase(const step_ops& ops, const roofline_rates& rates,
                                      std::array<double, op_class_count>* by_class = nullptr);

// The host-side constants each schedule of a step is linear in (planner/measure/timing_fit.cpp solves for them):
// the device's gap per kernel, the host's fixed cost per step, per kernel launched from Python, per kernel
// from the autograd engine (and the optimizer's and the GradScaler's), per foreach tensor.
inline constexpr int host_unknowns = 5;
using host_costs = std::array<double, host_unknowns>;

// A time the step cannot beat: the host reaching some point of the step, then the device's work from there
// on. device_seconds: the ops' roofline seconds in it; coefficients: how many of each host_costs unit.
struct schedule_term {
  double device_seconds = 0;
  host_costs coefficients{};
  double seconds(const host_costs& x) const {
    double t = device_seconds;
    for (int i = 0; i < host_unknowns; ++i) t += coefficients[i] * x[i];
    return t;
  }
};
struct step_schedules {
  static constexpr int capacity = 12;
  std::array<schedule_term, capacity> terms{};
  int count = 0;
};
// The step's schedules (planner/time/roofline.cpp), the step being the longest of them.
step_schedules schedules_of(const step_ops& ops, const phase_seconds& d);

op_time_breakdown estimate_op_times(const step_ops& ops, double peak_flops_per_s, double bandwidth_bytes_per_s,
                                    const timing_constants& k);

}  // namespace trainplan
