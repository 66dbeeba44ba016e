#pragma once
// The replays of one program already made, each standing for every capacity in which the replay would be the
// same (allocator_replay::same_replay_from_bytes and _below_bytes: planner/allocator/capacity_checks.hpp). A
// replay's capacity reaches the allocator's state only through its checks against the device's memory, so a
// replay asked for in any capacity of that range makes the same choices, event for event, and ends the same way:
// its result is the earlier one's. A sweep or search over GPUs (or budgets) asks one program for several
// capacities, and the bisection for the least memory a run needs probes the same capacities again for every
// budget it starts from; the replays they share are made once (planner/evaluate/allocator_replay.cpp).
//
// Only the result and the reserved path are kept: a replay asked for with per-event records (growth, states)
// is always made.
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/allocator/replay_program.hpp"

namespace trainplan {

class known_replays {
 public:
  struct known {
    allocator_replay result;
    reserved_path path;
    bool has_path = false;          // the replay kept its reserved path (replay_options::path)
    bool stopped_at_failure = false;  // asked to stop at its first failure (replay_options::stop_at_out_of_memory)
  };
  // At most this many per program, the first ones kept (a sweep asks a program for few capacities; a bisection
  // for a dozen at most).
  static constexpr std::size_t max_known = 48;

  // The earlier replay equal to one in `capacity_bytes` (~0: unlimited), or null. A replay asked to stop at its
  // first failure equals one that was not only where neither failed (it never stops early), and the other way.
  const known* find(std::uint64_t capacity_bytes, bool stop_at_failure) const {
    for (const known& k : replays_) {
      const allocator_replay& r = k.result;
      // A range with no failing check ends nowhere: the unlimited replay's capacity is in it.
      const bool in_range = r.same_replay_from_bytes <= capacity_bytes &&
                            (capacity_bytes < r.same_replay_below_bytes || r.same_replay_below_bytes == ~0ull);
      if (in_range && (k.stopped_at_failure == stop_at_failure || !r.out_of_memory)) return &k;
    }
    return nullptr;
  }
  // Keeps a replay made with these options (path: the one it filled, or null). Returns the bytes it added.
  std::uint64_t add(const allocator_replay& result, const reserved_path* path, bool stop_at_failure) {
    if (replays_.size() >= max_known || result.same_replay_from_bytes > result.same_replay_below_bytes) return 0;
    known& k = replays_.emplace_back();
    k.result = result;
    if (path) k.path = *path, k.has_path = true;
    k.stopped_at_failure = stop_at_failure;
    return sizeof(known) + k.path.capacity() * sizeof(reserved_path::value_type);
  }
  std::size_t size() const { return replays_.size(); }

 private:
  std::vector<known> replays_;
};

}  // namespace trainplan
