// The per-op roofline and the step's schedules (planner/time/roofline.hpp; Williams et al. 2009, "Roofline"):
// each op takes the longer of its FLOPs at the efficiency for its kind and shape and its bytes at the achieved
// bandwidth; the step is the longest of the ways the host and the device can meet at a phase boundary. Every
// expected time below is worked out by hand from those rules, on round numbers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "planner/time/roofline.hpp"

using namespace trainplan;

namespace {
constexpr double peak = 989.4e12, bandwidth = 3.35e12;

timing_constants constants() {
  timing_constants k;
  k.gemm_efficiency = 0.7, k.gemm_half_dim = 64, k.attention_efficiency = 0.4, k.bandwidth_fraction = 0.8;
  k.kernel_seconds = 5e-6, k.step_seconds = 0.001, k.foreach_tensor_seconds = 1e-4;
  return k;
}

// Round rates: 10^15 FLOP/s, 10^12 B/s, no GEMM shape factor.
constexpr double round_peak = 1e15, round_bandwidth = 1e12;
timing_constants round_constants() {
  timing_constants k;
  k.gemm_efficiency = 0.8, k.fp32_gemm_efficiency = 0.5, k.gemm_half_dim = 0, k.attention_efficiency = 0.5;
  k.bandwidth_fraction = 1;
  return k;
}

step_op op_of(op_class cls, double flops, double bytes) {
  step_op op;
  op.cls = cls;
  op.flops = flops;
  op.bytes = bytes;
  op.kernels = 1;
  return op;
}

// The host_costs units (planner/time/roofline.hpp) as the constants price them: the device's gap per kernel,
// the host's cost per step, per Python launch, per engine launch, per foreach tensor.
host_costs prices(const timing_constants& k) {
  return {k.kernel_seconds, k.step_seconds, k.forward_kernel_seconds, k.backward_kernel_seconds, k.foreach_tensor_seconds};
}

}  // namespace

TEST_CASE("roofline: fused attention runs at its efficiency, twice the time when masked rather than causal", "[time][roofline]") {
  const roofline_rates rates(round_peak, round_bandwidth, round_constants(), false);
  // 10^12 FLOPs at 0.5 of 10^15 FLOP/s: 2 ms. Handed a mask, the kernel computes every tile of the square its
  // FLOPs count, twice a causal kernel's: 4 ms.
  step_op attention = op_of(op_class::attention, 1e12, 0);
  CHECK(rates.seconds(attention) == Approx(2e-3));
  attention.every_tile = true;
  CHECK(rates.seconds(attention) == Approx(4e-3));
  // Eager attention's batched GEMMs are GEMM-shaped: the GEMM efficiency, 0.8: 1.25 ms.
  step_op eager = op_of(op_class::attention, 1e12, 0);
  eager.gemm_shaped = true;
  eager.m = eager.n = eager.k = 1024;
  CHECK(rates.seconds(eager) == Approx(1.25e-3));
}

TEST_CASE("roofline: fp32 GEMMs run at their own efficiency, and the shape factor is (1 + d/m)(1 + d/n)(1 + d/k)", "[time][roofline]") {
  step_op gemm = op_of(op_class::gemm, 1e12, 0);
  gemm.gemm_shaped = true;
  gemm.m = gemm.n = gemm.k = 1024;
  timing_constants k = round_constants();
  CHECK(roofline_rates(round_peak, round_bandwidth, k, false).seconds(gemm) == Approx(1e12 / (1e15 * 0.8)));
  CHECK(roofline_rates(round_peak, round_bandwidth, k, true).seconds(gemm) == Approx(1e12 / (1e15 * 0.5)));
  // With a half dimension of 1024, each dimension of 1024 halves the efficiency: 8 times 1.25 ms.
  k.gemm_half_dim = 1024;
  CHECK(roofline_rates(round_peak, round_bandwidth, k, false).seconds(gemm) == Approx(8 * 1.25e-3));
  CHECK(k.gemm_efficiency_at(1024, 1024, 1024) == Approx(0.8 / 8));
}

TEST_CASE("roofline: an op takes the longer of its compute and its memory time", "[time][roofline]") {
  const roofline_rates rates(round_peak, round_bandwidth, round_constants(), false);
  // 10^12 FLOPs of elementwise work at 0.8: 1.25 ms; 10^9 bytes at 10^12 B/s: 1 ms. Compute wins; with 2 * 10^9
  // bytes (2 ms) memory does.
  CHECK(rates.seconds(op_of(op_class::elementwise, 1e12, 1e9)) == Approx(1.25e-3));
  CHECK(rates.seconds(op_of(op_class::elementwise, 1e12, 2e9)) == Approx(2e-3));
  // An op without FLOPs (a copy) is its bytes; the achieved fraction of the bandwidth divides them.
  timing_constants k = round_constants();
  k.bandwidth_fraction = 0.5;
  CHECK(roofline_rates(round_peak, round_bandwidth, k, false).seconds(op_of(op_class::embedding, 0, 1e9)) == Approx(2e-3));
}

TEST_CASE("roofline: device time by phase follows each op's forward share, the scaler's and optimizer's ops apart", "[time][roofline]") {
  const roofline_rates rates(round_peak, round_bandwidth, round_constants(), false);
  step_ops ops;
  step_op layer = op_of(op_class::elementwise, 0, 4e9);  // 4 ms, a quarter of it in the forward
  layer.forward_share = 0.25;
  step_op unscale = op_of(op_class::elementwise, 0, 1e9);  // 1 ms, GradScaler's
  unscale.grad_scaler = true;
  ops.ops = {layer, unscale, op_of(op_class::optimizer, 0, 2e9), op_of(op_class::gemm, 0, 3e9)};
  std::array<double, op_class_count> by_class{};
  const phase_seconds d = device_seconds_by_phase(ops, rates, &by_class);
  CHECK(d.forward == Approx(1e-3 + 3e-3));  // the GEMM's 3 ms has the default share, all forward
  CHECK(d.backward == Approx(3e-3));
  CHECK(d.scaler == Approx(1e-3));
  CHECK(d.optimizer == Approx(2e-3));
  CHECK(by_class[static_cast<std::size_t>(op_class::elementwise)] == Approx(5e-3));
  CHECK(by_class[static_cast<std::size_t>(op_class::optimizer)] == Approx(2e-3));
  CHECK(by_class[static_cast<std::size_t>(op_class::gemm)] == Approx(3e-3));
  CHECK(by_class[static_cast<std::size_t>(op_class::overhead)] == 0);
}

TEST_CASE("roofline: a step has four schedules, two more with accumulation, one more with GradScaler's work", "[time][roofline]") {
  // The host at the start of F1 and of B1, and after the last backward (its launches of the optimizer, and
  // the Python preamble before them): 4. With N > 1 micro-batches the host at FN and BN too: 6. With GradScaler
  // work, the device's after the last backward: 5, and 7 with both. A host that waits for the device before the
  // optimizer: each of the six points before the optimizer, then the optimizer's device or host side: 12.
  step_ops ops;
  ops.ops = {op_of(op_class::elementwise, 0, 1e9), op_of(op_class::optimizer, 0, 1e9)};
  ops.launches = {10, 0, 20, 5, 0};
  const roofline_rates rates(round_peak, round_bandwidth, round_constants(), false);
  auto count = [&](const step_ops& o) { return schedules_of(o, device_seconds_by_phase(o, rates)).count; };
  CHECK(count(ops) == 4);
  step_ops accumulating = ops;
  accumulating.micro_batches = 4;
  CHECK(count(accumulating) == 6);
  step_ops scaled = ops;
  scaled.launches.scaler = 3;
  CHECK(count(scaled) == 5);
  scaled.micro_batches = 4;
  CHECK(count(scaled) == 7);
  scaled.host_waits_before_optimizer = true;
  CHECK(count(scaled) == step_schedules::capacity);
}

TEST_CASE("roofline: the first schedule is the device's whole work after the host's fixed cost", "[time][roofline]") {
  // One micro-batch, no scaler: the host at the start of F1 is the step's fixed cost; from there the device
  // runs the forward, the backward and the optimizer, with a gap per kernel: 10 + 30 + 5 kernels.
  step_ops ops;
  step_op layer = op_of(op_class::elementwise, 0, 4e9);
  layer.forward_share = 0.25;
  ops.ops = {layer, op_of(op_class::optimizer, 0, 2e9)};
  ops.launches = {10, 7, 23, 5, 0};
  const roofline_rates rates(round_peak, round_bandwidth, round_constants(), false);
  const step_schedules s = schedules_of(ops, device_seconds_by_phase(ops, rates));
  REQUIRE(s.count == 4);
  CHECK(s.terms[0].device_seconds == Approx(1e-3 + 3e-3 + 2e-3));
  CHECK(s.terms[0].coefficients == host_costs{10 + 7 + 23 + 5, 1, 0, 0, 0});
}

TEST_CASE("roofline: the step time is the longest schedule priced at the constants", "[time][roofline]") {
  // What planner/measure/timing_fit.cpp fits is what estimate_op_times prices: for every kind of step, the
  // longest schedule at the calibrated constants plus nothing is the step's time.
  timing_constants k = constants();
  k.forward_kernel_seconds = 30e-6, k.backward_kernel_seconds = 5e-6;
  step_ops base;
  step_op gemm = op_of(op_class::gemm, 4e12, 1e9);
  gemm.gemm_shaped = true, gemm.m = 4096, gemm.n = 4096, gemm.k = 1024, gemm.forward_share = 1.0f / 3;
  base.ops = {gemm, op_of(op_class::elementwise, 0, 2e9), op_of(op_class::optimizer, 0, 5e9)};
  base.launches = {400, 0, 800, 60, 0};
  base.foreach_tensors = 150;
  step_ops accumulating = base, scaled = base, waiting = base;
  accumulating.micro_batches = 4;
  scaled.launches.scaler = 12;
  waiting.launches.scaler = 12;
  waiting.host_waits_before_optimizer = true;
  for (const step_ops& ops : {base, accumulating, scaled, waiting}) {
    INFO("micro-batches " << ops.micro_batches << ", scaler launches " << ops.launches.scaler << ", host waits "
                          << ops.host_waits_before_optimizer);
    const op_time_breakdown t = estimate_op_times(ops, peak, bandwidth, k);
    const step_schedules s = schedules_of(ops, device_seconds_by_phase(ops, roofline_rates(peak, bandwidth, k, ops.fp32_gemms)));
    double longest = 0;
    for (int i = 0; i < s.count; ++i) longest = std::max(longest, s.terms[i].seconds(prices(k)));
    CHECK(t.total() == Approx(longest).epsilon(1e-12));
    // The kernels' time is the total less the overhead: what a profiler's busy time measures.
    CHECK(t.kernel_seconds() == Approx(t.total() - t.seconds[static_cast<std::size_t>(op_class::overhead)]));
  }
}

TEST_CASE("a large GEMM is compute-bound at e(m, n, k)", "[time][roofline]") {
  step_op op;
  op.cls = op_class::gemm;
  op.gemm_shaped = true;
  op.m = 8192, op.n = 8192, op.k = 8192;
  op.flops = 2 * op.m * op.n * op.k;
  op.bytes = (op.m * op.k + op.k * op.n + op.m * op.n) * 2;
  op.kernels = 1;
  const timing_constants k = constants();
  const double e = 0.7 * std::pow(8192.0 / (8192 + 64), 3);
  CHECK(op_device_seconds(op, peak, bandwidth, k) == Approx(op.flops / (peak * e)));
  CHECK(op.flops / (peak * e) > op.bytes / (bandwidth * 0.8));  // the compute side wins
  // A thin GEMM (k = 64) is slower per FLOP: half the efficiency on that dimension.
  step_op thin = op;
  thin.k = 64;
  thin.flops = 2 * thin.m * thin.n * thin.k;
  thin.bytes = 0;
  CHECK(op_device_seconds(thin, peak, bandwidth, k) / thin.flops > 1.9 * op_device_seconds(op, peak, bandwidth, k) / op.flops);
}

TEST_CASE("an elementwise layer is bandwidth-bound", "[time][roofline]") {
  step_op op;
  op.cls = op_class::elementwise;
  op.bytes = 4e9;
  op.flops = 1e9;
  op.kernels = 10;
  step_ops ops;
  ops.ops.push_back(op);
  ops.launches.forward = 4, ops.launches.backward = 6;
  const timing_constants k = constants();
  CHECK(op_device_seconds(op, peak, bandwidth, k) == Approx(4e9 / (bandwidth * 0.8)));
  const op_time_breakdown t = estimate_op_times(ops, peak, bandwidth, k);
  CHECK(t.seconds[static_cast<int>(op_class::elementwise)] == Approx(4e9 / (bandwidth * 0.8)));
  // No host cost per launch: the GPU never waits, and the rest is the gaps and the step's fixed cost.
  CHECK(t.seconds[static_cast<int>(op_class::overhead)] == Approx(10 * 5e-6 + 0.001));
}

namespace {
// A step of one forward op and one backward op of device_seconds each (bandwidth-bound bytes) with
// launches of each phase, and an optimizer of device_seconds and `tensors` foreach tensors.
step_ops phased_step(double device_seconds, double forward_launches, double recompute_launches,
                     double backward_launches, double tensors) {
  step_ops ops;
  step_op fwd;
  fwd.cls = op_class::elementwise;
  fwd.bytes = 2 * device_seconds * bandwidth * 0.8;  // half of it forward, half backward
  fwd.forward_share = 0.5;
  ops.ops.push_back(fwd);
  step_op opt;
  opt.cls = op_class::optimizer;
  opt.bytes = device_seconds * bandwidth * 0.8;
  ops.ops.push_back(opt);
  ops.launches = {forward_launches, recompute_launches, backward_launches, 1};
  ops.foreach_tensors = tensors;
  return ops;
}
}  // namespace

TEST_CASE("the GPU runs behind the host and waits for it only where the host is slower", "[time][roofline]") {
  timing_constants k;
  k.bandwidth_fraction = 0.8, k.kernel_seconds = 0, k.step_seconds = 0.002;
  k.forward_kernel_seconds = 30e-6, k.backward_kernel_seconds = 5e-6, k.foreach_tensor_seconds = 100e-6;
  // Device-bound: 10 ms a phase on the GPU, 1 ms of host each: the step is the device's 30 ms plus the fixed
  // host cost, and no more (the host's work hides behind the queue).
  const op_time_breakdown device_bound = estimate_op_times(phased_step(0.010, 33, 0, 200, 0), peak, bandwidth, k);
  CHECK(device_bound.total() == Approx(0.002 + 0.030));
  CHECK(device_bound.host_seconds < device_bound.device_seconds);
  // Host-bound forward: 1000 Python launches (30 ms) before the backward can start, then 10 + 10 ms on the GPU.
  const op_time_breakdown forward_bound = estimate_op_times(phased_step(0.010, 1000, 0, 200, 0), peak, bandwidth, k);
  CHECK(forward_bound.total() == Approx(0.002 + 0.030 + 0.010 + 0.010));
  // The same with a checkpointed forward rerun in backward from Python: 1000 more launches (30 ms) of host
  // work in backward, longer than the GPU's 10 ms there; the optimizer's kernel waits for it.
  const op_time_breakdown recomputed = estimate_op_times(phased_step(0.010, 1000, 1000, 200, 0), peak, bandwidth, k);
  CHECK(recomputed.total() == Approx(0.002 + 0.030 + 0.030 + 200 * 5e-6 + 0.010));
  // foreach AdamW's per-tensor Python runs before its first kernel: 500 tensors (50 ms) after a host-bound
  // backward delay the optimizer's kernels; the breakdown's overhead is the time the GPU has no kernel.
  const op_time_breakdown foreach = estimate_op_times(phased_step(0.010, 1000, 1000, 200, 500), peak, bandwidth, k);
  CHECK(foreach.total() == Approx(0.002 + 0.030 + 0.030 + 200 * 5e-6 + 0.050 + 0.010));
  CHECK(foreach.seconds[static_cast<int>(op_class::overhead)] == Approx(foreach.total() - 0.030));
  CHECK(foreach.host_seconds == Approx(0.002 + 0.030 + 0.030 + 200 * 5e-6 + 0.050 + 5e-6));
}
