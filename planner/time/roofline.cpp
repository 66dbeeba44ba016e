#include "planner/time/roofline.hpp"

#include <algorithm>

namespace trainplan {

phase_seconds device_seconds_by_phase(const step_ops& ops, const roofline_rates& rates,
                                      std::array<double, op_class_count>* by_class) {
  phase_seconds d;
  for (const step_op& op : ops.ops) {
    const double s = rates.seconds(op);
    if (by_class) (*by_class)[static_cast<std::size_t>(op.cls)] += s;
    if (op.grad_scaler) {
      d.scaler += s;
    } else if (op.cls == op_class::optimizer) {
      d.optimizer += s;
    } else {
      d.forward += s * op.forward_share;
      d.backward += s * (1 - op.forward_share);
    }
  }
  return d;
}

namespace {

// A stretch of device or host work, linear in the host_costs units: seconds plus counts of each unit
// (planner/measure/timing_fit.cpp solves for the units). estimate_op_times runs the same schedules on plain
// seconds: sweeps time millions of steps.
struct work {
  double seconds = 0;
  host_costs units{};
  work operator+(const work& o) const {
    work w{seconds + o.seconds, units};
    for (int i = 0; i < host_unknowns; ++i) w.units[i] += o.units[i];
    return w;
  }
  work operator*(double f) const {
    work w{seconds * f, units};
    for (double& u : w.units) u *= f;
    return w;
  }
};

// Indices into host_costs.
enum unit { gap, step, python_launch, engine_launch, foreach_tensor };

// The step's phases, each its device or its host time, in seconds (double) or as a work.
template <typename T>
struct phases {
  T device_f, device_b, device_u, device_o, host_f, host_b, host_u, host_o, preamble, step;
};

phases<work> phases_as_work(const step_ops& ops, const phase_seconds& d) {
  const step_launches& n = ops.launches;
  auto units = [](unit u, double count) {
    work w;
    w.units[u] = count;
    return w;
  };
  return {work{d.forward} + units(gap, n.forward),
          work{d.backward} + units(gap, n.recompute + n.backward),
          work{d.scaler} + units(gap, n.scaler),
          work{d.optimizer} + units(gap, n.optimizer),
          units(python_launch, n.forward),
          units(python_launch, n.recompute) + units(engine_launch, n.backward),
          units(engine_launch, n.scaler),
          units(engine_launch, n.optimizer),
          units(foreach_tensor, ops.foreach_tensors),
          units(step, 1)};
}

phases<double> phases_in_seconds(const step_ops& ops, const phase_seconds& d, const timing_constants& k) {
  const step_launches& n = ops.launches;
  return {d.forward + n.forward * k.kernel_seconds,
          d.backward + (n.recompute + n.backward) * k.kernel_seconds,
          d.scaler + n.scaler * k.kernel_seconds,
          d.optimizer + n.optimizer * k.kernel_seconds,
          n.forward * k.forward_kernel_seconds,
          n.recompute * k.forward_kernel_seconds + n.backward * k.backward_kernel_seconds,
          n.scaler * k.backward_kernel_seconds,
          n.optimizer * k.backward_kernel_seconds,
          ops.foreach_tensors * k.foreach_tensor_seconds,
          k.step_seconds};
}

// The phases as the stream runs them: F1 B1 F2 B2 ... FN BN (N micro-batches), the GradScaler's ops, the
// optimizer's per-tensor Python preamble P (no kernels), the optimizer's kernels. Each phase takes its device
// time (the ops' roofline seconds and a gap per kernel) and its host time (per launch, per foreach tensor).
// The device cannot start a kernel before the host issues it, so the step ends no earlier than the host
// reaching any point plus the device's work from there on; with each phase uniformly host- or device-bound
// within itself the latest such point is a phase boundary, and of the micro-batches' boundaries (linear in
// their index) the first or the last. A host that waits for the device before the optimizer (GradScaler's
// .item()) splits the step in two: the longest schedule up to that point, then P and the optimizer.
// Calls emit(schedule) for each.
template <typename T, typename Emit>
void for_each_schedule(const step_ops& ops, const phase_seconds& d, const phases<T>& p, Emit emit) {
  const double N = std::max(1.0, ops.micro_batches), first = 1 / N, rest = (N - 1) / N;
  // The host at the start of F1, of B1, of FN, of BN, after the last backward (twice: the device's
  // GradScaler work after it, or the host's launches of it).
  const T before_optimizer[] = {
      p.device_f + p.device_b + p.device_u,
      p.host_f * first + p.device_f * rest + p.device_b + p.device_u,
      (p.host_f + p.host_b) * rest + (p.device_f + p.device_b) * first + p.device_u,
      (p.host_f + p.host_b) * rest + p.host_f * first + p.device_b * first + p.device_u,
      p.host_f + p.host_b + p.device_u,
      p.host_f + p.host_b + p.host_u,
  };
  auto push = [&](const T& t) { emit(t + p.step); };
  if (ops.host_waits_before_optimizer) {
    for (const T& t : before_optimizer) {
      push(t + p.preamble + p.device_o);
      push(t + p.preamble + p.host_o);
    }
    return;
  }
  // With one micro-batch the first and last are the same boundaries; without GradScaler work the host's
  // last backward launch is followed by the preamble's longer wait. Neither is listed then, so that such a
  // step has exactly the four schedules it always had (and planner/measure/timing_fit.cpp the same fit).
  const bool accumulates = N > 1, scales = ops.launches.scaler > 0 || d.scaler > 0;
  for (int i = 0; i < 5; ++i)
    if (((i != 2 && i != 3) || accumulates) && (i != 4 || scales)) push(before_optimizer[i] + p.device_o);
  push(before_optimizer[5] + p.preamble + p.device_o);
  push(before_optimizer[5] + p.preamble + p.host_o);
}

}  // namespace

step_schedules schedules_of(const step_ops& ops, const phase_seconds& d) {
  step_schedules out;
  for_each_schedule(ops, d, phases_as_work(ops, d), [&](const work& w) {
    out.terms[out.count++] = {w.seconds, w.units};
  });
  return out;
}

// Each op's device time on the roofline; the step is the longest of its schedules.
op_time_breakdown estimate_op_times(const step_ops& ops, double peak_flops_per_s, double bandwidth_bytes_per_s,
                                    const timing_constants& k) {
  op_time_breakdown t;
  const phase_seconds d = device_seconds_by_phase(
      ops, roofline_rates(peak_flops_per_s, bandwidth_bytes_per_s, k, ops.fp32_gemms), &t.seconds);
  const phases<double> p = phases_in_seconds(ops, d, k);
  double step = 0;
  for_each_schedule(ops, d, p, [&](double s) { step = std::max(step, s); });
  t.host_seconds = p.step + p.host_f + p.host_b + p.host_u + p.preamble + p.host_o;
  t.device_seconds = p.device_f + p.device_b + p.device_u + p.device_o;
  t.host_work_seconds = t.host_seconds - k.step_seconds;
  double kernels = 0;
  for (double sec : t.seconds) kernels += sec;
  t.seconds[static_cast<std::size_t>(op_class::overhead)] = std::max(0.0, step - kernels);
  return t;
}

}  // namespace trainplan
