#pragma once
// Checks two allocator replays' results against each other (planner/allocator/allocator_trace.hpp), for the
// tests that compare a replay with a shortcut against the replay without it.
#include <catch2/catch.hpp>

#include "planner/allocator/allocator_trace.hpp"

namespace trainplan::test {

// Every field of a replay's result that the reference replay also gives, but what the replay did
// (events_replayed, events_skipped).
inline void check_same_result(const allocator_replay& fast, const allocator_replay& reference) {
  CHECK(fast.peak_allocated_bytes == reference.peak_allocated_bytes);
  CHECK(fast.peak_reserved_bytes == reference.peak_reserved_bytes);
  CHECK(fast.segments_made == reference.segments_made);
  CHECK(fast.out_of_memory == reference.out_of_memory);
  CHECK(fast.cache_releases == reference.cache_releases);
  CHECK(fast.failed_tensor == reference.failed_tensor);
  CHECK(fast.failed_step == reference.failed_step);
}

}  // namespace trainplan::test
