// What plan calibrate's fit adds beside its constants (planner/measure/calibration_fit.hpp): the 2%
// and 10% targets, and the planner's side of a measured run.
#include <catch2/catch.hpp>

#include "planner/measure/calibration_fit.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

// A run whose step and memory are those the fit reproduces (one run: the slack and the timing fit it exactly),
// then its device peak moved by `memory_off` (a fraction) in a second run.
calibration_observation observed(const std::string& label, std::uint64_t device_peak_bytes) {
  const gpu_spec& h100 = data().gpu("h100");
  run_config run;
  run.seq = 1024;
  calibration_observation o = planned_observation(label, data().model("gpt2").spec, run, h100, data().calibration_for(h100));
  o.tensor_peak_bytes = 4ull << 30;
  o.context_bytes = 500ull << 20;
  o.workspace_bytes = 32ull << 20;
  o.device_peak_bytes = device_peak_bytes;
  o.step_seconds = 0.1;
  return o;
}

}  // namespace

TEST_CASE("planned_observation: the planner's ops and peak for a run, the GPU's bandwidth", "[calibrate]") {
  const gpu_spec& h100 = data().gpu("h100");
  run_config run;
  run.seq = 1024;
  const calibration_observation o = planned_observation("gpt2 s1024", data().model("gpt2").spec, run, h100, data().calibration_for(h100));
  const plan_result p = evaluate_plan(data().model("gpt2").spec, run, h100, data().calibration_for(h100));
  CHECK(o.label == "gpt2 s1024");
  CHECK(o.peak_flops_per_s == p.time.peak_flops_per_s);
  CHECK(o.bandwidth_bytes_per_s == h100.memory_bandwidth_bytes_per_s);
  CHECK(o.ops.launches.total() == p.ops.launches.total());
  CHECK(o.memory_measured);  // the caller says what it measured
}

TEST_CASE("the fit's targets: every device peak within 2%, every step time within 10%", "[calibrate]") {
  // Two runs of the same tensors, context and workspace: the slack fits their mean, so device peaks of D and
  // 1.06 D miss by about 3% each way: over the 2% target. Equal peaks fit exactly: within it.
  const calibration base = data().calibration_for(data().gpu("h100"));
  const std::uint64_t D = 5ull << 30;
  calibration_fit fit = fit_calibration({observed("a", D), observed("b", D)}, base, "trainplan");
  CHECK(fit.max_memory_error_pct < 1e-6);
  CHECK(fit.memory_within_target);
  CHECK(fit.time_within_target == (fit.max_time_error_pct <= 10.0));
  CHECK(fit.within_targets() == (fit.memory_within_target && fit.time_within_target));
  fit = fit_calibration({observed("a", D), observed("b", D + D * 6 / 100)}, base, "trainplan");
  CHECK(fit.max_memory_error_pct == Approx(3.0).margin(0.1));
  CHECK_FALSE(fit.memory_within_target);
  CHECK_FALSE(fit.within_targets());
  CHECK(calibration_memory_target_pct == 2.0);
  CHECK(calibration_time_target_pct == 10.0);
}
