// The estimate against the replay on the committed collector reports (planner/measure/estimate_error.hpp): the
// replay's peak it compares with is the fit check's own, and the estimate is the sweep's without the replay.
#include <catch2/catch.hpp>

#include "planner/evaluate/plan.hpp"
#include "planner/measure/estimate_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

TEST_CASE("the bench's estimate error compares the sweep's estimate with the fit check's own peak", "[measured]") {
  const std::filesystem::path folder = std::filesystem::path(TRAINPLAN_TEST_DATA) / "measurements";
  const estimate_rows found = estimate_against_replay(data(), {folder});
  CHECK(found.files >= 1);
  // The shared file's 14 configurations are all one-GPU memory measurements under the replayed stack.
  REQUIRE(found.rows.size() >= 14);
  for (const estimate_row& row : found.rows) {
    INFO(row.id);
    const gpu_spec& gpu = data().gpu(row.gpu);
    const calibration calib = data().calibration_for(gpu);
    // What `plan` itself reports for the run: the same replayed peak.
    CHECK(evaluate_plan(row.model, row.run, gpu, calib).peak_bytes == row.replay_bytes);
    // What `plan sweep --estimate` reports for it: the same estimate.
    plan_options options;
    options.detail = timeline_detail::peak;
    CHECK(evaluate_plan(row.model, row.run, gpu, calib, options).peak_bytes == row.estimate_bytes);
  }
}
