// A stack's constants from its collector's reports (planner/measure/collector_fit.hpp): the context's median,
// and which runs the step-time fit takes.
#include <catch2/catch.hpp>

#include <string>

#include "planner/measure/collector_fit.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/measured_runs.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

measured_file with_context(std::uint64_t context_bytes) {
  measured_file f;
  f.context_bytes = context_bytes;
  return f;
}

}  // namespace

TEST_CASE("fit_collector_context: the median context of the reports, written into the stack's entry", "[calibrate][hf]") {
  constexpr std::uint64_t MiB = 1ull << 20;
  const calibration base = data().calibration_for(data().gpu("h100"));
  // 600, 400, 500 MiB: the median is 500; of 400 and 600, the upper one (a measured value, not their mean).
  collector_context_fit c = fit_collector_context({with_context(600 * MiB), with_context(400 * MiB), with_context(500 * MiB)}, base, "hf");
  CHECK(c.context_bytes == 500 * MiB);
  CHECK(c.before_bytes == base.context_bytes("hf"));
  CHECK(c.fitted.context_bytes("hf") == 500 * MiB);
  CHECK(c.fitted.context_bytes("trainplan") == base.context_bytes("trainplan"));  // another stack's entry stays
  c = fit_collector_context({with_context(400 * MiB), with_context(600 * MiB)}, base, "hf");
  CHECK(c.context_bytes == 600 * MiB);
  CHECK_THROWS_AS(fit_collector_context({}, base, "hf"), input_error);
}

TEST_CASE("fit_collector_timing: every timed run, then another host's profiled runs by their busy times alone", "[calibrate][hf][measured]") {
  const gpu_spec& h100 = data().gpu("h100");
  const calibration base = data().calibration_for(h100);
  const measured_file steps = test::shared_h100_step_times();  // step times alone, not profiled
  const measured_file profiled = test::project_measurements("pytorch-hf-h100-2026-11-26-extra-2.jsonl");
  std::size_t timed_steps = 0, busy_only = 0;
  for (const measured_run& r : steps.runs) timed_steps += !r.out_of_memory;
  for (const measured_run& r : profiled.runs) busy_only += !r.out_of_memory && r.gpu_profile.has_value();
  REQUIRE(timed_steps == 2);
  REQUIRE(busy_only == 8);

  const collector_timing_fit fit = fit_collector_timing({steps}, {profiled}, h100, base, "hf");
  REQUIRE(fit.timed.size() == timed_steps + busy_only);
  CHECK(fit.device_only_runs == busy_only);
  CHECK(fit.step_time_runs() == timed_steps);
  for (std::size_t i = 0; i < fit.timed.size(); ++i) {
    const timing_observation& o = fit.timed[i];
    if (i < timed_steps) {
      CHECK(o.label == steps.runs[i].id);
      CHECK(o.measured_seconds == steps.runs[i].step_seconds);
    } else {
      CHECK(o.label.size() > 7);
      CHECK(o.label.substr(o.label.size() - 7) == " (busy)");
      CHECK(o.measured_seconds == 0);  // the other host's step time is not fitted
      CHECK(o.busy_seconds > 0);
    }
  }
  CHECK(fit.timing.predicted_seconds.size() == fit.timed.size());
  CHECK(fit.fitted.timing("hf").gemm_efficiency == fit.timing.constants.gemm_efficiency);
  CHECK(fit.fitted.context_bytes("hf") == base.context_bytes("hf"));
  // --device-only reports without a profiled run have no busy time to give.
  CHECK_THROWS_AS(fit_collector_timing({steps}, {steps}, h100, base, "hf"), input_error);
}
