#pragma once
// Compiled replay programs shared by content. A search or sweep evaluates many configurations whose allocator
// schedules are equal: DDP at several GPU counts, levers that change only the step's time, the same run on GPUs
// of other sizes. A schedule (schedule_allocations) and its program (compile_schedule) depend only on the
// inventory's content, the model's facts, min(grad_accum, 3) (the micro-batches it replays), the steps and the
// settings below, so a program is kept under exactly those: a hash picks the candidates, the full key decides
// (every field of the inventory, written out: program_cache.cpp).
//
// A schedule's operations depend on even less: on the buffers' sizes only through how each splits into PyTorch
// tensors. A miss whose inventory differs from an earlier one's only in sizes (another micro-batch, sequence
// length, GPU count of the same buffers) takes that schedule's operations and works out only the sizes
// (resize_schedule), instead of building and sorting them. (The operations name a tensor of a buffer only where a
// backward program places one parameter's gradient; a buffer that then no longer splits into whole parameters
// is an error in both ways of building: resolve_program's.)
//
// A program built for a new key may still equal an earlier entry's, event for event (same_program_content: an
// inventory that differs only where the allocator cannot see it, as levers that change no allocation do): the
// new key then shares that entry, whose replays answer it (two in five of an all-lever search's new keys).
//
// Each entry also keeps what its caller derived from the program at a capacity (apply_allocator_replay's
// outcome, bisection included: planner/evaluate/plan.cpp), which depends on nothing else.
//
// Bounded: past its bound (max_bytes unless given) of programs and keys, the cache starts over. The facts must
// outlive the cache (they are matched by address, as plan_reuse matches them).
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/allocator/known_replays.hpp"
#include "planner/allocator/replay_program.hpp"

namespace trainplan {

// A schedule's settings beyond its operations (allocator_schedule's fields of the same names).
struct schedule_settings {
  bool expandable_segments = false;
  std::uint64_t gpu_total_bytes = 80ull << 30;
  std::uint64_t workspace_bytes = 0, lt_workspace_bytes = 0;
  std::array<bool, 2> lt_after{};
  void apply(allocator_schedule& s) const;
};

class program_cache {
 public:
  struct entry {
    inventory inv;            // the program's (replay_program::inv points here)
    replay_program program;
    // The caller's outcomes by capacity (bytes): apply_allocator_replay's replay and bisection.
    std::vector<std::pair<std::uint64_t, allocator_replay>> outcomes;
    // The replays behind them, each answering every capacity that makes the same replay (known_replays.hpp).
    known_replays replays;
  };
  static constexpr std::uint64_t max_bytes = 128ull << 20;  // one cache's default bound
  // For `workers` caches kept side by side (one per thread): each at most the default, all of them together at
  // most twice it, and none less than a quarter of it.
  static std::uint64_t bytes_per_worker(unsigned workers) {
    return std::min(max_bytes, std::max<std::uint64_t>(max_bytes / 4, 2 * max_bytes / std::max(1u, workers)));
  }
  explicit program_cache(std::uint64_t bound_bytes = max_bytes) : prefixes_(bound_bytes / 4), bound_bytes_(bound_bytes) {}

  // The program for this schedule, compiled on the first request; valid until the next call.
  entry& get(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum, const schedule_settings& settings,
             int steps = 3);

  // Counts bytes an entry took after get() returned it (its known replays) against the bound; the cache starts
  // over, if it must, at the next get().
  void grew(std::uint64_t bytes) { bytes_ += bytes; }

  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }
  // Of the misses, those whose schedule was an earlier one's operations with new sizes (resize_schedule).
  std::uint64_t structures_shared() const { return structures_shared_; }
  // Of those, the programs refilled from one compiled earlier for the structure and pattern (refill_program).
  std::uint64_t programs_refilled() const { return programs_refilled_; }
  // Of the misses, those whose program turned out equal to an earlier entry's (same_program_content): that
  // entry, its replays and outcomes, under the new key too.
  std::uint64_t contents_shared() const { return contents_shared_; }
  // The replays' states at their programs' first optimizer step, for programs that begin alike (another
  // optimizer, its states offloaded or sharded): bounded apart from the programs, kept when they start over.
  prefix_checkpoints& prefixes() { return prefixes_; }

 private:
  // A schedule's operations (no sizes), under its structure key: most levers and every micro-batch and
  // sequence length change only the sizes.
  struct structure {
    std::vector<std::uint64_t> key;
    allocator_schedule schedule;  // its operations (no sizes)
    // The first program compiled from it for each pattern of pieces (a piece empty or placed apart, workspaces
    // made: schedule_pattern), and what its events came from: a later one with that pattern is it refilled with
    // its own sizes (refill_program), not compiled again. A search's recompute, batch and adapter levers give one
    // structure a few patterns (a buffer empty at one micro-batch and not another); at most max_patterns kept.
    struct compiled {
      replay_program program;
      program_origins origins;
    };
    static constexpr std::size_t max_patterns = 16;
    std::vector<compiled> programs;
  };
  struct keyed {
    std::vector<std::uint64_t> key;
    entry* program;
  };
  // Builds made.program (resized and refilled, or compiled) for its inventory; a new structure in `kept`.
  // Returns the bytes it added, but for the entry's own.
  std::uint64_t build_program(entry& made, const model_facts& facts, std::uint64_t grad_accum, const schedule_settings& settings,
                              int steps, std::unique_ptr<structure>& kept);

  std::vector<std::unique_ptr<entry>> entries_;
  std::unordered_multimap<std::uint64_t, keyed> keys_;                             // by the key's hash
  std::unordered_multimap<std::uint64_t, entry*> contents_;                        // by program_content_hash
  std::unordered_multimap<std::uint64_t, std::unique_ptr<structure>> structures_;  // by the structure key's hash
  prefix_checkpoints prefixes_;
  std::vector<std::uint64_t> key_, structure_key_, pattern_;                       // the request's, reused
  std::uint64_t structure_hash_ = 0;                                               // structure_key_'s
  std::uint64_t bound_bytes_, bytes_ = 0, hits_ = 0, misses_ = 0, structures_shared_ = 0, programs_refilled_ = 0, contents_shared_ = 0;
};

// The key's words (program_cache.cpp): exposed for the test that a changed field changes it.
void program_cache_key(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum,
                       const schedule_settings& settings, int steps, std::vector<std::uint64_t>& out);
// The structure key: the same words without the settings and without any tensor's shape, dtype or bytes.
void schedule_structure_key(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum, int steps,
                            std::vector<std::uint64_t>& out);

}  // namespace trainplan
