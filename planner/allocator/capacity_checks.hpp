#pragma once
// What a replay's capacity decided: each time the allocator asks the device for memory (cudaMalloc of a
// segment, or with expandable segments cuMemMap of pages) it checks the request against the capacity, and
// nothing else about the capacity reaches its state. A replay in another capacity therefore makes the same
// choices, event for event, exactly while every check goes the same way in it: for capacities from the most
// memory a passing check left reserved up to (not including) the least a failing check asked for. The
// bisection for the least memory a run needs (planner/evaluate/allocator_replay.cpp) skips every capacity in
// that range after one probe, instead of stepping through it 2 MiB at a time.
#include <algorithm>
#include <cstdint>

namespace trainplan {

struct capacity_checks {
  std::uint64_t passed_reserved_bytes = 0;   // the most reserved after a request the capacity allowed
  std::uint64_t failed_asked_bytes = ~0ull;  // the least reserved-plus-request the capacity refused

  void passed(std::uint64_t reserved_after) { passed_reserved_bytes = std::max(passed_reserved_bytes, reserved_after); }
  void failed(std::uint64_t reserved_before, std::uint64_t request) {
    const std::uint64_t asked = request > ~0ull - reserved_before ? ~0ull : reserved_before + request;
    failed_asked_bytes = std::min(failed_asked_bytes, asked);
  }
};

}  // namespace trainplan
