// The cluster fit of plan calibrate --cluster-from (planner/measure/cluster_fit.hpp) on the hand-made report
// tests/data/cluster-fit/ddp-2x8-h100.jsonl (a collector report of a DDP run on 2 nodes of 8 H100s with its
// collectives; the times invented), and the fitted factors as the cluster model applies them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "planner/io/catalog.hpp"
#include "planner/measure/cluster_fit.hpp"
#include "planner/time/collectives.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

measured_file report() {
  const std::filesystem::path path = std::filesystem::path(TRAINPLAN_TEST_DATA) / "cluster-fit" / "ddp-2x8-h100.jsonl";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_measurements(text.str(), path.string());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

TEST_CASE("a collector report's layout and collectives are read into the run planned", "[measure][cluster_fit]") {
  const measured_file f = report();
  REQUIRE(f.runs.size() == 1);
  const measured_run& r = f.runs[0];
  REQUIRE(r.layout);
  CHECK(r.layout->mode == "ddp");
  CHECK(r.layout->world_size == 16);
  CHECK(r.layout->nodes == 2);
  CHECK_FALSE(r.layout->fake_process_group);
  CHECK(r.run.gpus == 16);
  CHECK(r.run.zero == 0);
  CHECK(r.time_comparable);
  // Five collectives the planner times; a broadcast and a kernel without sizes are counted, not kept.
  CHECK(r.collectives.size() == 5);
  CHECK(r.collectives_left_out == 2);
  CHECK(r.collectives[0].coll == collective::all_reduce);
  CHECK(r.collectives[0].message_bytes == 26214400);
  CHECK(r.collectives[3].coll == collective::all_gather);
  CHECK(r.collectives[3].nodes == 1);
}

TEST_CASE("the fitted factor of each collective and scope is 1 / the median measured/model ratio", "[measure][cluster_fit]") {
  const cluster_spec& dgx = data().cluster("dgx-h100");
  const std::vector<measured_file> files{report()};
  const cluster_fit fit = fit_cluster(dgx, files);
  REQUIRE(fit.samples.size() == 5);
  CHECK(fit.left_out == 2);
  REQUIRE(fit.rows.size() == 2);  // all_reduce across nodes, all_gather inside one
  for (const cluster_fit_row& row : fit.rows) {
    std::vector<double> ratios;
    for (const measured_collective& m : files[0].runs[0].collectives)
      if (m.coll == row.coll && (m.nodes > 1) == (row.scope == link_scope::inter_node))
        ratios.push_back(m.seconds / collective_seconds(dgx, m.coll, m.message_bytes, {m.ranks, m.nodes}));
    CHECK(row.samples == ratios.size());
    CHECK(row.median_ratio == Approx(median(ratios)).epsilon(1e-12));
    CHECK(row.factor == Approx(1 / median(ratios)).epsilon(1e-12));
    // With an odd count (3 all-reduces) the median sample is predicted exactly after the fit.
    if (ratios.size() % 2)
      CHECK(std::any_of(ratios.begin(), ratios.end(), [&](double r) { return std::abs(r / row.median_ratio - 1) < 1e-12; }));
    CHECK(row.max_error_after_pct <= row.max_error_before_pct + 1e-9);
  }
  CHECK(fit.rows[0].coll == collective::all_reduce);
  CHECK(fit.rows[0].scope == link_scope::inter_node);
  CHECK(fit.rows[1].coll == collective::all_gather);
  CHECK(fit.rows[1].scope == link_scope::intra_node);

  SECTION("the cluster model applies a factor to its collective and scope alone") {
    cluster_spec fitted = dgx;
    fitted.fitted.push_back({collective::all_reduce, link_scope::inter_node, fit.rows[0].factor, 3, "test"});
    const double bytes = 26214400;
    CHECK(collective_seconds(fitted, collective::all_reduce, bytes, {16, 2}) ==
          Approx(collective_seconds(dgx, collective::all_reduce, bytes, {16, 2}) / fit.rows[0].factor));
    CHECK(collective_seconds(fitted, collective::all_reduce, bytes, {8, 1}) == collective_seconds(dgx, collective::all_reduce, bytes, {8, 1}));
    CHECK(collective_seconds(fitted, collective::all_gather, bytes, {16, 2}) == collective_seconds(dgx, collective::all_gather, bytes, {16, 2}));
    // A refit starts from the model: the same reports give the same factors whatever the preset held.
    const cluster_fit again = fit_cluster(fitted, files);
    CHECK(again.rows[0].factor == Approx(fit.rows[0].factor).epsilon(1e-12));
  }
}

TEST_CASE("a report measured on a larger node than the preset's is refused, naming the run", "[measure][cluster_fit]") {
  measured_file f = report();
  f.runs[0].collectives[3].ranks = 16;  // 16 ranks on one node
  CHECK_THROWS_WITH(fit_cluster(data().cluster("dgx-h100"), {f}), Catch::Contains("run D1") && Catch::Contains("another cluster"));
  f.runs[0].collectives.clear();
  CHECK_THROWS_WITH(fit_cluster(data().cluster("dgx-h100"), {f}), Catch::Contains("no collective the planner times"));
}
