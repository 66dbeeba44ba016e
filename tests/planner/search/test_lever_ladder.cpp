// plan max --levers' ladder (planner/search/lever_ladder.hpp): groups by cost and number of changes, each
// group's furthest row, joining only above the rows before it; a row is reached only when its bound could join.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/search/lever_ladder.hpp"
#include "planner/search/levers.hpp"

using namespace trainplan;

namespace {

ladder_row row(std::vector<std::string> changes, unsigned costs, std::uint64_t bound) {
  ladder_row r;
  r.changes = std::move(changes);
  r.costs = costs;
  r.value = bound;
  return r;
}

}  // namespace

TEST_CASE("ladder_order ranks by cost first, then by the number of changes", "[max][levers]") {
  const ladder_row none0 = row({}, cost_none, 0), none1 = row({"--recompute full"}, cost_none, 0);
  const ladder_row slower0 = row({"--offload optimizer"}, cost_slower, 0), numerics1 = row({"--precision bf16"}, cost_numerics, 0);
  const ladder_row hardware1 = row({"--gpus 2"}, cost_hardware, 0), both = row({"--gpus 2"}, cost_hardware | cost_numerics, 0);
  CHECK(ladder_order(none0, none1));
  CHECK_FALSE(ladder_order(none1, none0));
  CHECK(ladder_order(none1, slower0));        // same numerics on this GPU before slower
  CHECK(ladder_order(slower0, numerics1));    // slower before changed numerics
  CHECK(ladder_order(numerics1, hardware1));  // changed numerics before more GPUs
  CHECK_FALSE(ladder_order(hardware1, both));  // hardware with numerics ranks as hardware: one group
  CHECK_FALSE(ladder_order(both, hardware1));
}

TEST_CASE("build_ladder: each group's furthest row, joining only above the rows before it", "[max][levers]") {
  // The bounds and what each row reaches (-1: nothing), derived by hand:
  //   group (none, 0 changes):      A bound 100 reaches 90           -> joins: 90
  //   group (none, 1 change):       B bound 300 reaches 250, C bound 200 (never asked: below B's 250) -> 250
  //   group (numerics, 1 change):   D bound 260 reaches 240, not above 250            -> no row
  //   group (numerics, 2 changes):  E bound 400 reaches 350                          -> 350
  //   group (hardware, 1 change):   F bound 1000 reaches nothing                      -> no row
  //   group (hardware, 2 changes):  G bound 500 reaches 300, not above 350           -> no row
  const std::vector<ladder_row> bounded = {
      row({}, cost_none, 100),
      row({"--precision bf16"}, cost_numerics, 260),
      row({"--attention flash"}, cost_none, 200),
      row({"--recompute full"}, cost_none, 300),
      row({"--precision bf16", "--recompute full"}, cost_numerics, 400),
      row({"--gpus 2 --zero 1"}, cost_hardware, 1000),
      row({"--gpus 2 --zero 1", "--recompute full"}, cost_hardware, 500),
  };
  const std::map<std::string, long long> reaches = {{"", 90},
                                                    {"--precision bf16", 240},
                                                    {"--attention flash", 180},
                                                    {"--recompute full", 250},
                                                    {"--precision bf16 --recompute full", 350},
                                                    {"--gpus 2 --zero 1", -1},
                                                    {"--gpus 2 --zero 1 --recompute full", 300}};
  std::vector<std::string> asked;
  auto key = [](const ladder_row& r) {
    std::string k;
    for (const std::string& c : r.changes) k += (k.empty() ? "" : " ") + c;
    return k;
  };
  const std::vector<ladder_row> ladder = build_ladder(bounded, [&](const ladder_row& r) -> std::optional<ladder_row> {
    asked.push_back(key(r));
    const long long v = reaches.at(key(r));
    if (v < 0) return std::nullopt;
    ladder_row reached = r;
    reached.value = static_cast<std::uint64_t>(v);
    reached.peak_bytes = 1000 + reached.value;
    return reached;
  });
  REQUIRE(ladder.size() == 3);
  CHECK(key(ladder[0]) == "");
  CHECK(ladder[0].value == 90);
  CHECK(key(ladder[1]) == "--recompute full");
  CHECK(ladder[1].value == 250);
  CHECK(ladder[1].peak_bytes == 1250);  // the reached row, not the bounded one
  CHECK(key(ladder[2]) == "--precision bf16 --recompute full");
  CHECK(ladder[2].value == 350);
  // C's bound (200) is below B's reach (250): never asked; everything else is.
  CHECK(std::find(asked.begin(), asked.end(), "--attention flash") == asked.end());
  CHECK(asked.size() == 6);
}

TEST_CASE("build_ladder: of two rows that reach as far, the one first in the given order", "[max][levers]") {
  const std::vector<ladder_row> bounded = {row({"--recompute full"}, cost_none, 200), row({"--attention flash"}, cost_none, 200)};
  const std::vector<ladder_row> ladder = build_ladder(bounded, [](const ladder_row& r) -> std::optional<ladder_row> {
    ladder_row reached = r;
    reached.value = 150;
    return reached;
  });
  REQUIRE(ladder.size() == 1);
  CHECK(ladder[0].changes == std::vector<std::string>{"--recompute full"});
  // Nothing reaches anything: an empty ladder.
  CHECK(build_ladder(bounded, [](const ladder_row&) -> std::optional<ladder_row> { return std::nullopt; }).empty());
}
