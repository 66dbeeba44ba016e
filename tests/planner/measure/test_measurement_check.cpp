// plan check's comparisons without the CLI (planner/measure/measurement_check.hpp): measured values set at
// known distances from the prediction give those errors back, and the tolerances decide.
#include <catch2/catch.hpp>

#include <cmath>

#include "planner/measure/measurement_check.hpp"
#include "tests/support/measured_runs.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

const gpu_spec& h100() { return data().gpu("h100"); }
calibration calib() { return data().calibration_for(h100()); }

}  // namespace

TEST_CASE("check_measured_run: errors of measurements set 2%, 4% and 25% off the prediction, against the tolerances",
          "[check][measured]") {
  const measured_file f = test::shared_h100_measurements();
  measured_run r = f.runs.front();
  REQUIRE(r.memory_measured);
  REQUIRE_FALSE(r.out_of_memory);
  const run_check predicted = check_measured_run(f, r, h100(), calib(), {}, false);
  // The device peak is the file's context plus what the allocator reserves in the GPU's memory, its cuBLAS
  // workspaces included (what max_memory_reserved() reads).
  REQUIRE(predicted.plan.allocator);
  CHECK(predicted.predicted_device_bytes ==
        static_cast<double>(f.context_bytes + predicted.plan.allocator->budget_reserved_bytes +
                            predicted.plan.overhead.cublas_workspace_bytes));
  // Measured: the tensors 1.02x below the prediction (+2%), the device 0.96x above it (-4%), the step 1.25x
  // the prediction ((p - 1.25 p) / 1.25 p = -20%).
  r.alloc_peak_bytes = static_cast<std::uint64_t>(std::llround(predicted.predicted_tensor_bytes / 1.02));
  r.reserved_peak_bytes =
      static_cast<std::uint64_t>(std::llround(predicted.predicted_device_bytes / 0.96)) - f.context_bytes;
  r.step_seconds = predicted.plan.time.step_seconds * 1.25;
  r.segments.clear();
  r.gpu_profile.reset();
  run_check c = check_measured_run(f, r, h100(), calib(), {3, 5, 20}, false);
  CHECK(c.tensor_error_pct == Approx(2.0).margin(1e-6));
  CHECK(c.device_error_pct == Approx(-4.0).margin(1e-6));
  CHECK(c.step_error_pct == Approx(-20.0).margin(1e-9));
  CHECK(c.within);
  CHECK_FALSE(check_measured_run(f, r, h100(), calib(), {1.9, 5, 20}, false).within);
  CHECK_FALSE(check_measured_run(f, r, h100(), calib(), {3, 3.9, 20}, false).within);
  CHECK_FALSE(check_measured_run(f, r, h100(), calib(), {3, 5, 19.9}, false).within);
  CHECK(c.growth.empty());  // no segments listed, none asked for
  CHECK_FALSE(c.segments);
  CHECK_FALSE(c.busy);

  check_totals totals;
  totals.add(r, c);
  CHECK(totals.worst_tensor_pct == Approx(2.0).margin(1e-6));
  CHECK(totals.worst_device_pct == Approx(4.0).margin(1e-6));
  CHECK(totals.worst_time_pct == Approx(20.0).margin(1e-9));
  CHECK(totals.all_within);

  // A step time alone: only the step is compared (and counted in the totals).
  measured_run timed = r;
  timed.memory_measured = false;
  timed.step_seconds = predicted.plan.time.step_seconds / 1.5;  // +50%
  const run_check t = check_measured_run(f, timed, h100(), calib(), {}, false);
  CHECK(t.step_error_pct == Approx(50.0).margin(1e-9));
  CHECK(t.predicted_tensor_bytes == 0);
  CHECK_FALSE(t.within);
  totals.add(timed, t);
  CHECK(totals.worst_time_pct == Approx(50.0).margin(1e-9));
  CHECK(totals.worst_tensor_pct == Approx(2.0).margin(1e-6));
  CHECK_FALSE(totals.all_within);

  // A run that ran out of memory is within when the plan says it does not fit: this one fits.
  measured_run oom = r;
  oom.out_of_memory = true;
  const run_check o = check_measured_run(f, oom, h100(), calib(), {}, false);
  CHECK(o.plan.fits);
  CHECK_FALSE(o.within);
  check_totals oom_totals;
  oom_totals.add(oom, o);
  CHECK_FALSE(oom_totals.all_within);
  CHECK(oom_totals.worst_time_pct == 0);
}

TEST_CASE("check_measured_run: a profiled run's busy time and kernels, a listed run's segments", "[check][allocator][measured]") {
  const measured_file f = test::shared_h100_measurements();
  measured_run r = f.runs.front();
  const run_check predicted = check_measured_run(f, r, h100(), calib(), {}, true);
  CHECK_FALSE(predicted.growth.empty());  // asked for (--segments-out) with no segments listed
  // Busy 1/0.9 of the roofline's kernel time (-10%), half the kernels the ops launch (+100%).
  const double kernel_seconds = predicted.plan.time.breakdown.kernel_seconds();
  const double launches = predicted.plan.ops.launches.total();
  REQUIRE(launches >= 2);
  r.gpu_profile = measured_gpu_profile{kernel_seconds / 0.9, static_cast<std::uint64_t>(launches / 2)};
  const run_check c = check_measured_run(f, r, h100(), calib(), {}, false);
  REQUIRE(c.busy);
  CHECK(c.busy->kernel_seconds == kernel_seconds);
  CHECK(c.busy->busy_error_pct == Approx(-10.0).margin(1e-9));
  CHECK(c.busy->kernels_error_pct == Approx(100.0 * (launches - std::floor(launches / 2)) / std::floor(launches / 2)).epsilon(1e-12));

  // The collector's segments: compared with the replay's, which lists one growth a segment.
  const measured_file gaps = test::project_measurements("pytorch-hf-h100-2026-11-26-gaps.jsonl");
  const measured_run* listed = nullptr;
  for (const measured_run& run : gaps.runs)
    if (!run.segments.empty() && !run.run.expandable_segments && !run.out_of_memory) listed = &run;
  REQUIRE(listed);
  const run_check s = check_measured_run(gaps, *listed, h100(), calib(), {}, false);
  REQUIRE(s.segments);
  CHECK(s.segments->measured_count == listed->segments.size());
  CHECK(s.segments->replayed_count == s.growth.size());
}
