// plan check --json (cli/check_json.cpp): the shared measurement file's runs as one object, with the measured
// figures the report holds (tests/data/measurements/pytorch-hf-h100-2026-11-22.jsonl) and errors that follow
// from them; the text and the JSON agree on the verdict.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"

using nlohmann::json;
using namespace trainplan::test;

TEST_CASE("plan check --json lists each run with what was measured and predicted", "[cli]") {
  const std::string file = fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl");
  const plan_run r = run_plan("check --one-process --json " + file);
  const plan_run text = run_plan("check --one-process " + file);
  INFO(r.err);
  CHECK(r.exit_code == text.exit_code);
  const json j = json::parse(r.out);
  CHECK(j["schema_version"] == 1);
  REQUIRE(j["files"].size() == 1);
  const json& runs = j["files"][0]["runs"];
  REQUIRE(runs.size() == 14);
  const json& s1 = runs[0];
  CHECK(s1["id"] == "S1");
  CHECK(s1["status"] == "measured");
  CHECK(s1["configuration"]["family"] == "gpt");
  CHECK(s1["configuration"]["micro_batch"] == 4);
  // The report's own figures: S1's alloc_peak and its step time.
  CHECK(s1["tensor_peak_bytes"]["measured"].get<std::uint64_t>() == 7'984'365'568ull);
  CHECK(s1["step_seconds"]["measured"].get<double>() == Approx(0.0683).margin(0.00005));
  for (const json& run : runs)
    for (const char* kind : {"tensor_peak_bytes", "device_peak_bytes", "step_seconds"}) {
      const double measured = run[kind]["measured"].get<double>(), predicted = run[kind]["predicted"].get<double>();
      CHECK(run[kind]["error_pct"].get<double>() == Approx(100 * (predicted - measured) / measured).margin(1e-3));
    }
  CHECK(j["all_within"].get<bool>() == (r.exit_code == 0));
  expect_refused("check --json --segments-out " + scratch_dir("trainplan-check-json").string() + "/s.jsonl " + file,
                 {"--segments-out", "--json"});
}
