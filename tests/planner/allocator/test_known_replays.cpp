// A program's earlier replays answer a capacity only inside their same-replay range, and a replay asked to stop at
// its first failure only where stopping cannot have changed it (planner/allocator/known_replays.hpp).
#include <catch2/catch.hpp>

#include "planner/allocator/known_replays.hpp"

using namespace trainplan;

namespace {

allocator_replay ranged(std::uint64_t from, std::uint64_t below, bool out_of_memory) {
  allocator_replay r;
  r.same_replay_from_bytes = from, r.same_replay_below_bytes = below, r.out_of_memory = out_of_memory;
  r.peak_reserved_bytes = from;
  return r;
}

}  // namespace

TEST_CASE("known replays: a capacity is answered inside the range, from its first byte to the byte before its end",
          "[unit][allocator]") {
  known_replays known;
  known.add(ranged(100, 200, true), nullptr, false);
  CHECK(known.find(99, false) == nullptr);
  REQUIRE(known.find(100, false) != nullptr);
  CHECK(known.find(100, false)->result.peak_reserved_bytes == 100);
  CHECK(known.find(199, false) != nullptr);
  CHECK(known.find(200, false) == nullptr);
  CHECK(known.find(~0ull, false) == nullptr);  // the unlimited replay never fails: not this one
}

TEST_CASE("known replays: a replay that never failed answers the unlimited capacity and every one above its reservation",
          "[unit][allocator]") {
  known_replays known;
  reserved_path path{{3, 50}, {9, 120}};
  known.add(ranged(120, ~0ull, false), &path, false);
  for (const std::uint64_t capacity : {120ull, 1ull << 40, ~0ull}) {
    const known_replays::known* k = known.find(capacity, false);
    REQUIRE(k != nullptr);
    CHECK(k->has_path);
    CHECK(k->path == path);
  }
  CHECK(known.find(119, false) == nullptr);
  // It never failed, so asked to stop at a failure it is the same replay.
  CHECK(known.find(1ull << 40, true) != nullptr);
}

TEST_CASE("known replays: one that failed answers only replays asked to stop as it was", "[unit][allocator]") {
  known_replays known;
  known.add(ranged(100, 200, true), nullptr, true);  // stopped at its failure: the events after it were not replayed
  CHECK(known.find(150, false) == nullptr);
  CHECK(known.find(150, true) != nullptr);
  CHECK_FALSE(known.find(150, true)->has_path);
  known.add(ranged(300, 400, true), nullptr, false);  // ran on past its failure: peaks and counts differ from a stop
  CHECK(known.find(350, true) == nullptr);
  CHECK(known.find(350, false) != nullptr);
}

TEST_CASE("known replays: an empty range is not kept, and at most max_known are", "[unit][allocator]") {
  known_replays known;
  CHECK(known.add(allocator_replay{}, nullptr, false) == 0);  // replay_compiled did not set it: answers nothing
  CHECK(known.size() == 0);
  for (std::uint64_t k = 0; k < known_replays::max_known + 5; ++k) known.add(ranged(10 * k, 10 * k + 10, true), nullptr, true);
  CHECK(known.size() == known_replays::max_known);
  CHECK(known.find(5, true) != nullptr);
  CHECK(known.find(10 * known_replays::max_known + 5, true) == nullptr);
}
