#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "planner/measure/calibration_fit.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/measure/timing_fit.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

// A synthetic step whose parts vary independently from run to run (a fixed pseudo-random sequence), so
// that each constant is identifiable: GEMMs of several shapes, memory-bound elementwise work, attention,
// launches of each phase and foreach tensors. Some runs are device-bound, some wait for the host's forward
// or backward.
step_ops synthetic_ops(int k) {
  std::uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(k + 1);
  auto next = [&](double lo, double hi) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
  };
  step_ops ops;
  for (int g = 0; g < 2; ++g) {
    step_op gemm;
    gemm.name = "gemm";
    gemm.cls = op_class::gemm;
    gemm.gemm_shaped = true;
    gemm.m = std::round(next(32, 8192)), gemm.n = std::round(next(32, 4096)), gemm.k = std::round(next(32, 4096));
    gemm.flops = 2 * gemm.m * gemm.n * gemm.k * std::round(next(50, 400));
    gemm.kernels = 100;
    gemm.forward_share = 1.0 / 3;
    ops.ops.push_back(gemm);
  }
  step_op ew;
  ew.name = "elementwise";
  ew.cls = op_class::elementwise;
  ew.bytes = next(1e8, 1e10);
  ew.kernels = std::round(next(100, 5000));
  ew.forward_share = 0.4;
  ops.ops.push_back(ew);
  step_op attention;
  attention.name = "attention";
  attention.cls = op_class::attention;
  attention.flops = next(1e11, 3e13);
  attention.kernels = 100;
  attention.forward_share = 0.25;
  ops.ops.push_back(attention);
  ops.foreach_tensors = k % 3 ? std::round(next(10, 300)) : 0;
  step_op optimizer;
  optimizer.name = "optimizer";
  optimizer.cls = op_class::optimizer;
  optimizer.bytes = next(1e8, 2e10);
  ops.ops.push_back(optimizer);
  ops.launches.forward = std::round(next(100, 3000));
  ops.launches.recompute = k % 4 == 1 ? ops.launches.forward : 0;
  ops.launches.backward = std::round(k % 2 ? next(6000, 16000) : next(100, 3000));
  ops.launches.optimizer = std::round(next(1, 60));
  return ops;
}

timing_constants truth_constants() {
  timing_constants t;
  t.gemm_efficiency = 0.6, t.gemm_half_dim = 128, t.attention_efficiency = 0.35, t.bandwidth_fraction = 0.75;
  t.kernel_seconds = 6e-6, t.step_seconds = 0.004, t.foreach_tensor_seconds = 8e-5;
  t.forward_kernel_seconds = 25e-6, t.backward_kernel_seconds = 7e-6;
  return t;
}

// Runs generated from known constants: the fit must give them back.
std::vector<calibration_observation> runs_from(const calibration& truth, double noise_pct = 0) {
  std::vector<calibration_observation> runs;
  for (int k = 0; k < 16; ++k) {
    const std::uint64_t tensors = (10ull + 4ull * static_cast<std::uint64_t>(k)) << 30;
    calibration_observation o;
    o.label = "run" + std::to_string(k);
    o.tensor_peak_bytes = tensors;
    o.context_bytes = truth.cuda_context_bytes + (k == 2 ? 4096 : 0);  // one odd run: the median ignores it
    o.workspace_bytes = truth.cublas_workspace_bytes;
    o.device_peak_bytes = tensors + static_cast<std::uint64_t>(static_cast<double>(tensors) * truth.allocator_slack_fraction) +
                          truth.cuda_context_bytes + truth.cublas_workspace_bytes;
    o.peak_flops_per_s = 989.4e12;
    o.bandwidth_bytes_per_s = 3.35e12;
    o.ops = synthetic_ops(k);
    o.step_seconds = estimate_op_times(o.ops, o.peak_flops_per_s, o.bandwidth_bytes_per_s,
                                       truth.timing("trainplan")).total();
    o.step_seconds *= 1 + (k % 2 ? noise_pct : -noise_pct) / 100;
    runs.push_back(o);
  }
  return runs;
}

}  // namespace

TEST_CASE("calibration fitting recovers known constants", "[calibrate]") {
  calibration truth;
  truth.cuda_context_bytes = 600ull << 20;
  truth.cublas_workspace_bytes = 32ull << 20;
  truth.allocator_slack_fraction = 0.03;
  truth.stack("trainplan").timing = truth_constants();
  calibration base;
  base.safety_margin_fraction = 0.05;
  const calibration_fit fit = fit_calibration(runs_from(truth), base, "trainplan");
  // The stack's own keys: the literature's context and slack (every other stack's) stay as the base had them.
  REQUIRE(fit.fitted.stack("trainplan"));
  CHECK(fit.fitted.stack("trainplan")->cuda_context_bytes == truth.cuda_context_bytes);
  CHECK(fit.fitted.cublas_workspace_bytes == truth.cublas_workspace_bytes);
  CHECK(*fit.fitted.stack("trainplan")->allocator_slack_fraction == Approx(0.03).epsilon(1e-6));
  CHECK(fit.fitted.cuda_context_bytes == base.cuda_context_bytes);
  CHECK(fit.fitted.allocator_slack_fraction == base.allocator_slack_fraction);
  CHECK(fit.fitted.context_bytes("trainplan") == truth.cuda_context_bytes);
  CHECK(fit.fitted.slack_fraction("megatron") == base.allocator_slack_fraction);
  const timing_constants& t = fit.fitted.timing("trainplan");
  CHECK(t.gemm_efficiency == Approx(0.6));
  CHECK(t.gemm_half_dim == 128);
  CHECK(t.attention_efficiency == Approx(0.35));
  CHECK(t.bandwidth_fraction == Approx(0.75));
  CHECK(t.kernel_seconds == Approx(6e-6).epsilon(1e-6));
  CHECK(t.step_seconds == Approx(0.004).epsilon(1e-6));
  CHECK(t.foreach_tensor_seconds == Approx(8e-5).epsilon(1e-6));
  CHECK(t.forward_kernel_seconds == Approx(25e-6).epsilon(1e-6));
  CHECK(t.backward_kernel_seconds == Approx(7e-6).epsilon(1e-6));
  CHECK(fit.fitted.safety_margin_fraction == 0.05);  // not measured: kept from the base
  CHECK(fit.max_memory_error_pct < 1e-6);
  CHECK(fit.max_time_error_pct < 1e-6);
}

TEST_CASE("calibration residuals show the noise the fit cannot remove", "[calibrate]") {
  calibration truth;
  truth.cuda_context_bytes = 500ull << 20;
  truth.cublas_workspace_bytes = 32ull << 20;
  truth.allocator_slack_fraction = 0.02;
  truth.stack("trainplan").timing = truth_constants();
  const calibration_fit fit = fit_calibration(runs_from(truth, 5.0), calibration{}, "trainplan");
  CHECK(fit.max_time_error_pct > 1.0);   // +-5% alternating noise cannot be fitted away
  CHECK(fit.max_time_error_pct < 10.0);  // but the fit stays close
  CHECK(fit.residuals.size() == 16);
}

TEST_CASE("the timing fit refuses what it cannot fit", "[calibrate]") {
  CHECK_THROWS_AS(fit_calibration({}, calibration{}, "trainplan"), input_error);
  CHECK_THROWS_AS(fit_timing({}), input_error);
  timing_observation bad{"bad", synthetic_ops(0), 989.4e12, 3.35e12, 0.0};
  CHECK_THROWS_AS(fit_timing({bad}), input_error);
  bad.measured_seconds = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(fit_timing({bad}), input_error);
}

TEST_CASE("held out, each run is predicted by the constants fitted on the others", "[calibrate]") {
  calibration truth;
  truth.stack("trainplan").timing = truth_constants();
  std::vector<timing_observation> runs = timing_observations(runs_from(truth));
  // Runs the model makes exactly: 15 of them pin the constants, so the 16th is predicted exactly too (with
  // 11 of 12 they do not: a run held out from 12 missed by 4.3%).
  const held_out_fit exact = fit_held_out(runs);
  REQUIRE(exact.predicted_seconds.size() == runs.size());
  CHECK(exact.max_error_pct < 1e-6);
  // One run the model cannot make (30% slower than its ops say): the fit over all runs absorbs part of it,
  // so its residual understates the miss; held out, it is predicted from the others alone.
  runs[5].measured_seconds *= 1.3;
  const timing_fit all = fit_timing(runs);
  const held_out_fit held = fit_held_out(runs);
  const double in_fit = 100.0 * std::abs(all.predicted_seconds[5] - runs[5].measured_seconds) / runs[5].measured_seconds;
  CHECK(std::abs(held.error_pct[5]) > in_fit);
  CHECK(held.error_pct[5] == Approx(100.0 * (1 / 1.3 - 1)).margin(0.5));  // the others still pin the truth
  CHECK(held.max_error_pct == Approx(std::abs(held.error_pct[5])));
  CHECK_THROWS_AS(fit_held_out({runs[0]}), input_error);
}

TEST_CASE("the GPU's busy time pins the device constants where the step time is the host's", "[calibrate]") {
  // Every run bound by the host (Python's launches cost 400 us each here): the step times say nothing of the
  // GEMM, attention and bandwidth constants. The profiled busy time (the roofline's kernel time, as
  // collect_hf.py --profile measures it) does, and the fit gives them back with the host costs.
  timing_constants truth = truth_constants();
  truth.forward_kernel_seconds = 400e-6, truth.backward_kernel_seconds = 300e-6;
  std::vector<timing_observation> runs;
  int host_bound = 0;
  for (int k = 0; k < 16; ++k) {
    const step_ops ops = synthetic_ops(k);
    const op_time_breakdown t = estimate_op_times(ops, 989.4e12, 3.35e12, truth);
    host_bound += t.host_seconds > t.device_seconds ? 1 : 0;
    runs.push_back({"run" + std::to_string(k), ops, 989.4e12, 3.35e12, t.total(), t.kernel_seconds()});
  }
  REQUIRE(host_bound == 16);
  const timing_fit fit = fit_timing(runs);
  CHECK(fit.max_error_pct < 1e-6);
  CHECK(fit.constants.gemm_efficiency == Approx(0.6));
  CHECK(fit.constants.gemm_half_dim == 128);
  CHECK(fit.constants.attention_efficiency == Approx(0.35));
  CHECK(fit.constants.bandwidth_fraction == Approx(0.75));
  CHECK(fit.constants.forward_kernel_seconds == Approx(400e-6).epsilon(1e-6));
  // A busy time that is no number of seconds is refused.
  runs[3].busy_seconds = -1;
  CHECK_THROWS_AS(fit_timing(runs), input_error);
}

TEST_CASE("the timing fit keeps the host constants within what calibration.json accepts", "[calibrate]") {
  // A run of an hour and a half fitted as 1.5 hours of launch cost would give kernel_seconds far above the
  // loader's 1 s: plan calibrate -o then refused its own output. Only constants the loader takes are fits.
  const timing_observation slow{"slow", synthetic_ops(1), 989.4e12, 3.35e12, 5400.0};
  const timing_fit fit = fit_timing({slow});
  CHECK(fit.constants.kernel_seconds <= timing_limits::max_kernel_seconds);
  CHECK(fit.constants.step_seconds <= timing_limits::max_step_seconds);
  CHECK(fit.constants.foreach_tensor_seconds <= timing_limits::max_foreach_tensor_seconds);
  CHECK(fit.constants.forward_kernel_seconds <= timing_limits::max_host_kernel_seconds);
  CHECK(fit.constants.backward_kernel_seconds <= timing_limits::max_host_kernel_seconds);
}

TEST_CASE("the synthetic runs mix device-bound and host-bound steps", "[calibrate]") {
  // Otherwise the fit above would not show that it finds which schedule binds each run.
  calibration truth;
  truth.stack("trainplan").timing = truth_constants();
  int host_bound = 0, device_bound = 0;
  for (int k = 0; k < 16; ++k) {
    const op_time_breakdown t = estimate_op_times(synthetic_ops(k), 989.4e12, 3.35e12, truth_constants());
    (t.host_seconds > t.device_seconds + truth_constants().step_seconds ? host_bound : device_bound) += 1;
  }
  CHECK(host_bound >= 3);
  CHECK(device_bound >= 3);
}

TEST_CASE("the timing fit follows the schedules of accumulating and GradScaler steps", "[calibrate][accumulation]") {
  // The fit solves the same schedules estimate_op_times takes the longest of (planner/time/roofline.cpp,
  // schedules_of): with micro-batches that alternate forward and backward, and a host that waits for the
  // device before the optimizer (GradScaler's .item()), it still gives the constants back.
  std::vector<timing_observation> runs;
  for (int k = 0; k < 16; ++k) {
    step_ops ops = synthetic_ops(k);
    ops.micro_batches = k % 3 == 0 ? 4 : k % 3 == 1 ? 2 : 1;
    if (k % 4 == 2 || k % 4 == 3) {
      step_op check;
      check.name = "grad_scaler.unscale";
      check.cls = op_class::optimizer;
      check.grad_scaler = true;
      check.bytes = 1e9;
      ops.ops.push_back(check);
      ops.launches.scaler = 13;
      ops.host_waits_before_optimizer = k % 4 == 2;
    }
    const double seconds = estimate_op_times(ops, 989.4e12, 3.35e12, truth_constants()).total();
    runs.push_back({"run" + std::to_string(k), ops, 989.4e12, 3.35e12, seconds});
  }
  const timing_fit fit = fit_timing(runs);
  CHECK(fit.max_error_pct < 1e-6);
  CHECK(fit.constants.gemm_efficiency == Approx(0.6));
  CHECK(fit.constants.bandwidth_fraction == Approx(0.75));
  CHECK(fit.constants.forward_kernel_seconds == Approx(25e-6).epsilon(1e-6));
  CHECK(fit.constants.backward_kernel_seconds == Approx(7e-6).epsilon(1e-6));
  CHECK(fit.constants.foreach_tensor_seconds == Approx(8e-5).epsilon(1e-6));
}

TEST_CASE("the H100's harness calibration applies to the trainplan profile alone", "[calibrate]") {
  // data/calibration.json's h100 entry: plan calibrate on the GPU suite of 2026-11-27 (reports/).
  const gpu_spec& h100 = test::data().gpu("h100");
  const calibration c = test::data().calibration_for(h100);
  REQUIRE(c.stack("trainplan"));
  REQUIRE(c.stack("trainplan")->cuda_context_bytes);
  CHECK(c.context_bytes("trainplan") == 623706112);  // 0.58 GiB, measured
  CHECK(c.context_bytes("megatron") == 1ull << 30);  // the literature's 1 GiB
  CHECK(c.context_bytes("hf") == 648871936);         // PyTorch's, measured with torch 2.11 on an H100
  CHECK(c.slack_fraction("trainplan") < 0.01);
  CHECK(c.slack_fraction("megatron") == 0.02);
  // Another GPU has no harness measurement: its trainplan profile keeps the literature's values.
  const calibration a100 = test::data().calibration_for(test::data().gpu("a100-80gb"));
  CHECK_FALSE(a100.stack("trainplan")->cuda_context_bytes);
  CHECK(a100.context_bytes("trainplan") == 1ull << 30);
}
