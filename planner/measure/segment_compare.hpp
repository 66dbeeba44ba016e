#pragma once
// Segment by segment: what PyTorch's caching allocator held after a measured run (collect_hf.py's
// "segments", from torch.cuda.memory_snapshot()) against the segments the allocator replay reserves for the
// same configuration (planner/allocator/allocator_trace.hpp). The default allocator never returns a segment unless
// cudaMalloc fails, so both lists are every segment the run made and each sums to its reserved peak; where
// the counts of a size differ, the replay's last-made segments of that size are the first suspects.
#include <cstdint>
#include <string_view>
#include <vector>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/measure/measured_runs.hpp"

namespace trainplan {

// One size of segment (pool and bytes) whose count differs between the measurement and the replay.
struct segment_size_difference {
  bool small_pool = false;
  std::uint64_t bytes = 0;
  std::uint64_t measured = 0, replayed = 0;  // how many segments of this size each holds
  // With more in the replay: its segments of this size beyond the measured count, the last made, in the
  // order it made them (the buffer whose allocation made each, and the step).
  std::vector<allocator_growth> replay_extra;
  std::int64_t difference_bytes() const {
    return (static_cast<std::int64_t>(replayed) - static_cast<std::int64_t>(measured)) * static_cast<std::int64_t>(bytes);
  }
};

struct segment_comparison {
  std::uint64_t measured_count = 0, measured_bytes = 0;
  std::uint64_t replayed_count = 0, replayed_bytes = 0;
  std::uint64_t matched_count = 0;  // segments of a size both hold, counted once per pair
  // Only the sizes whose counts differ, the largest difference in bytes first (then the larger size).
  std::vector<segment_size_difference> differences;
};

// `replayed`: the growth of a replay with PyTorch's default allocator and no capacity (each entry a new
// segment of added_bytes).
segment_comparison compare_segments(const std::vector<measured_segment>& measured,
                                    const std::vector<allocator_growth>& replayed);

}  // namespace trainplan
