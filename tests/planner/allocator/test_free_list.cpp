// free_list (planner/allocator/free_list.hpp) against a std::set ordered by (size, segment, offset), as
// caching_allocator keeps its pools: the same best fit after every random insert, erase, take and filter, and the
// same order walked from it (fast_expandable_allocator's get_free_block).
#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "planner/allocator/free_list.hpp"

using namespace trainplan;

namespace {

using key = std::tuple<std::uint64_t, std::uint32_t, std::uint64_t, std::uint32_t>;  // size, segment, offset, index

key key_of(const free_list::entry& e) { return {e.size, e.segment, e.offset, e.index}; }

}  // namespace

TEST_CASE("free list: best fit, insert, erase and filter as an ordered set, over 200,000 random operations", "[allocator]") {
  std::mt19937_64 rng(7);
  free_list list;
  std::set<key> reference;
  std::uint32_t next_index = 0;
  std::uint64_t takes = 0, misses = 0, largest = 0, walks = 0;
  for (int n = 0; n < 200000; ++n) {
    const std::uint64_t op = rng() % 100;
    if (op < 60) {  // a block becomes free: sizes from a few values (ties by segment and offset) or any
      free_list::entry e;
      e.size = (rng() % 2 ? 512 * (1 + rng() % 8) : 512 * (1 + rng() % 40000));
      e.segment = static_cast<std::uint32_t>(rng() % 50);
      e.offset = 512 * (rng() % 1000);
      e.index = next_index++;
      if (reference.count(key_of(e)) || std::any_of(reference.begin(), reference.end(), [&](const key& k) {
            return std::get<0>(k) == e.size && std::get<1>(k) == e.segment && std::get<2>(k) == e.offset;
          }))
        continue;  // one block per place
      list.insert(e);
      reference.insert(key_of(e));
    } else if (op < 70 && !reference.empty()) {  // a free block merged away: erase by key
      auto it = reference.begin();
      std::advance(it, static_cast<long>(rng() % reference.size()));
      const free_list::entry e{std::get<0>(*it), std::get<2>(*it), std::get<1>(*it), std::get<3>(*it)};
      CHECK(list.erase(e));
      reference.erase(it);
    } else if (op < 84) {  // expandable segments' walk: from the first block not smaller, a few steps on, taken there
      const std::uint64_t want = 512 * (1 + rng() % 40000);
      auto it = reference.lower_bound(key{want, 0, 0, 0});
      free_list::position at;
      REQUIRE(list.first_not_smaller(want, at) == (it != reference.end()));
      if (it == reference.end()) continue;
      for (std::uint64_t steps = rng() % 5; steps > 0; --steps) {
        CHECK(key_of(list.at(at)) == *it);
        free_list::position next = at;
        const bool more = list.next(next);
        REQUIRE(more == (std::next(it) != reference.end()));
        if (!more) break;
        at = next, ++it;
      }
      CHECK(key_of(list.at(at)) == *it);
      list.erase(at);
      reference.erase(it);
      ++walks;
    } else if (op < 98) {  // an allocation: the first block not smaller
      const std::uint64_t want = 512 * (1 + rng() % 40000);
      const auto it = reference.lower_bound(key{want, 0, 0, 0});
      free_list::entry got;
      const bool found = list.take_best_fit(want, got);
      REQUIRE(found == (it != reference.end()));
      if (found) {
        CHECK(key_of(got) == *it);
        reference.erase(it);
        ++takes;
      } else {
        ++misses;
      }
    } else {  // releasing cached segments: drop the blocks of some segments, visiting all in order
      const std::uint32_t drop = static_cast<std::uint32_t>(rng() % 50);
      std::vector<key> visited;
      list.keep_only([&](const free_list::entry& e) {
        visited.push_back(key_of(e));
        return e.segment % 7 != drop % 7;
      });
      CHECK(visited == std::vector<key>(reference.begin(), reference.end()));
      for (auto it = reference.begin(); it != reference.end();) it = std::get<1>(*it) % 7 == drop % 7 ? reference.erase(it) : std::next(it);
    }
    REQUIRE(list.size() == reference.size());
    largest = std::max<std::uint64_t>(largest, reference.size());
  }
  // Not found where it is not there: a wrong index at a block's place.
  if (!reference.empty()) {
    const key& k = *reference.begin();
    CHECK_FALSE(list.erase({std::get<0>(k), std::get<2>(k), std::get<1>(k), std::get<3>(k) + 1}));
  }
  CHECK(takes > 1000);
  CHECK(walks > 1000);
  CHECK(misses > 0);
  CHECK(largest > 4 * 32);  // many runs of at most 32
}
