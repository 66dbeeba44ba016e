#pragma once
// An allocator schedule (allocator_trace.hpp) compiled into a flat program: one entry per allocate or free call
// the replay makes, in order, the cuBLAS workspaces included, each allocation's handle kept in a slot of one
// array. Built once per schedule and replayed as often as the caller needs (apply_allocator_replay's bisection
// replays one schedule at a dozen capacities), with no heap allocation per event.
//
// The fixed point: the last step's events are those of the step before (the same sizes in the same order, each
// free of a block that step made, or of the same older block), so where the allocator's state at the start of
// the last step equals its state at the start of the step before (the fast twins' state(): the same
// blocks in the same places, held by the same slots, segments compared by their order), the last step replays
// exactly as the one before did: no new peak, and as many segments made and cached segments freed as the step
// before (a step in memory so short that it frees its cache every time repeats too). The replay then leaves it
// out and counts those. A step's third micro-batch likewise repeats its second (both add into the gradients the
// first made): where the states at their starts are equal, the third is left out and the replay goes on at the
// step's optimizer, from the state the second left, which is the state the third would leave (every slot is
// made once, so a state equal to an earlier one holds no block made since: the third's blocks are all freed
// within it). Proved against the full replay on every committed measurement configuration and on
// random ones, in capacities that make the allocator free its cache or run out (tests/planner/allocator/
// test_replay_program.cpp).
#include <cstdint>
#include <list>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/allocator/fast_caching_allocator.hpp"
#include "planner/allocator/fast_expandable_allocator.hpp"

namespace trainplan {

struct replay_program {
  struct event {  // 16 bytes: a search replays a hundred million of them
    std::uint32_t size = 0;   // an allocation's request, as its index in `sizes` (never 0); 0: a free
    std::uint32_t slot = 0;   // where the allocation's handle goes, or the handle a free gives back
    std::uint32_t what = 0;   // the allocation's buffer (index in inv->tensors), or one of the workspaces below
    std::int16_t step = 0;    // the buffer's 0-based step (-1: creating the model), reported on a failure
    bool stop_check = false;  // with stop_at_out_of_memory, the replay may stop after this event
    bool workspace = false;   // a cuBLAS workspace: left out of the peaks
  };
  static constexpr std::uint32_t cublas_workspace = ~0u, cublaslt_workspace = ~0u - 1;
  // Where `sizes` holds a free's 0 and the workspaces' requests; each buffer's pieces follow, in the order of
  // the schedule's buffers (size_table in replay_program.cpp).
  static constexpr std::uint32_t free_size = 0, cublas_size = 1, cublaslt_size = 2;

  const inventory* inv = nullptr;
  // The events, shared by every program refilled from the one compiled for their schedule's structure and
  // pattern (refill_program): a refilled program differs only in `sizes`.
  std::shared_ptr<const std::vector<event>> shared_events;
  std::vector<std::uint64_t> sizes;  // bytes by event::size
  std::uint32_t slots = 0;
  std::uint64_t workspace_bytes = 0;  // for the capacity: both cuBLAS workspaces take part in it
  bool expandable_segments = false;
  std::uint64_t gpu_total_bytes = 0;
  // Events [begin, end) that repeat [from, begin) as the fixed point requires: a step's third micro-batch its
  // second, the last step the one before (end: events.size()). In order of `from`; only those that repeat.
  struct repeat_range {
    std::size_t from = 0, begin = 0, end = 0;
    bool operator==(const repeat_range&) const = default;
  };
  std::vector<repeat_range> repeats;
  // The first event of the first optimizer step (0: none): a replay resumes there from another program's
  // state where the events before it are alike (prefix_checkpoints below).
  std::size_t prefix_end = 0;

  const std::vector<event>& events() const {
    static const std::vector<event> none;
    return shared_events ? *shared_events : none;
  }
  std::uint64_t bytes(const event& e) const { return sizes[e.size]; }
};

// What a program was compiled from, so that a schedule with the same operations can be compiled by refilling
// its sizes (refill_program): the pattern the events depend on (how many pieces each buffer splits into, which
// are empty or placed apart, which workspaces are made), and the fixed point's candidate ranges, which repeat
// or not with other sizes.
struct program_origins {
  std::vector<std::uint64_t> pattern;  // schedule_pattern's words
  std::vector<replay_program::repeat_range> repeat_candidates;
  // By candidate: whether it repeats at any sizes (the same pieces of the same buffers in both ranges, not only
  // the same bytes), so that a refill need not compare its events again.
  std::vector<bool> repeats_at_any_size;
};

replay_program compile_schedule(const allocator_schedule& schedule, program_origins* origins = nullptr);

// The program compile_schedule(schedule) makes, from `like`, compiled (with `origins`) from a schedule with the same
// operations (resize_schedule's: another micro-batch or sequence length): `like`'s events, shared, with this
// schedule's sizes. False, leaving `out` unspecified, where the pattern differs (a piece empty in one and not the
// other, a workspace made in one only): compile_schedule then. `schedule`'s operations are not read (nor
// compared: the caller knows them the same, as program_cache's structure key does) and may be left out.
bool refill_program(const replay_program& like, const program_origins& origins, const allocator_schedule& schedule,
                    replay_program& out);
// The pattern refill_program compares (program_origins::pattern): for each buffer its count of pieces and which
// are empty or placed apart, the workspaces made, the instances: not the operations, which `schedule` may leave
// out (resize_schedule without them).
void schedule_pattern(const allocator_schedule& schedule, std::vector<std::uint64_t>& out);

// Programs that replay alike in every capacity, with every option: the same settings (allocator, its address
// space where expandable, workspaces) and the same events, each with the same request in bytes, slot, flags,
// step and, for an allocation, buffer name. Two inventories that differ only where the allocator cannot see it
// (a lever that changes no allocation on the GPU, a host buffer, a summary field) compile to such programs. (Their fixed-point ranges may
// differ; the fixed point is exact, so their results do not.) program_content_hash is equal for equal programs.
std::uint64_t program_content_hash(const replay_program& p);
bool same_program_content(const replay_program& a, const replay_program& b);
// The same for the first `end` events alone, where a replay resumed after them takes only the allocator's state
// from them (prefix_checkpoints below): their bytes, slots, frees and workspaces, not their steps, stop checks or
// names, which only failures and growth records read, and a prefix resumed from has neither.
std::uint64_t prefix_content_hash(const replay_program& p, std::size_t end);
bool same_prefix_content(const replay_program& a, const replay_program& b, std::size_t end);

// A replay stopped before one of its events, to resume other replays from. A replay in a capacity follows the
// replay without one event for event until the first segment (with expandable segments, the first pages mapped)
// that would pass the capacity (caching_allocator.hpp, expandable_allocator.hpp: a limit acts only when
// cudaMalloc or cuMemMap would fail); so a checkpoint taken
// before event j of any replay that had freed no cached segment by then serves every capacity that holds what
// was reserved at j. apply_allocator_replay's bisection resumes each probe from the last point its probes
// share, instead of replaying the steps again from the model's creation.
struct replay_checkpoint {
  fast_caching_allocator allocator;                   // the default allocator's replay
  fast_expandable_allocator expandable_allocator{0};  // or the expandable segments' (the program's replay sets both)
  std::vector<fast_caching_allocator::handle> handles;  // by slot
  std::size_t next_event = 0;
  std::uint64_t workspaces_made = 0;
};

// Where a replay's reservations grew while it had freed no cached segment and not run out: (event, reserved
// bytes after it, workspaces included). Up to the first such freeing, any replay follows the unlimited one.
using reserved_path = std::vector<std::pair<std::size_t, std::uint64_t>>;

class prefix_checkpoints;

struct replay_options {
  std::vector<allocator_growth>* growth = nullptr;
  std::uint64_t capacity_bytes = ~0ull;
  bool stop_at_out_of_memory = false;
  bool skip_repeated_step = true;                 // the fixed point's shortcut (the tests turn it off to compare)
  std::vector<std::size_t>* skipped = nullptr;     // the repeats left out, by their index in program.repeats
  std::vector<allocator_event_state>* events = nullptr;  // the state after each event replayed
  reserved_path* path = nullptr;                         // filled as the replay goes
  // Start from `resume` (its reserved bytes within this capacity, workspaces included), and keep the state
  // before event `save_before` in `save`.
  const replay_checkpoint* resume = nullptr;
  replay_checkpoint* save = nullptr;
  std::size_t save_before = ~std::size_t{0};
  // Where given, a replay not resumed otherwise and asked for no per-event records resumes at the program's
  // prefix_end from a state kept there by a replay of a program that begins alike, or keeps its own state
  // there for the next (prefix_checkpoints below).
  prefix_checkpoints* prefixes = nullptr;
};

// Replays' states at the start of the first optimizer step, kept by the events before it, so that a program
// whose events begin the same way resumes there instead of replaying them (replay_options::prefixes).
//
// Programs that differ only from the first optimizer step on are common where a search or sweep varies the
// optimizer: its kind, its implementation (fused or foreach), its states offloaded or sharded (ZeRO-1), the
// GPU count under ZeRO-1. Each replays the model's creation and the first step's micro-batches as the others
// did, a third to a half of its events (docs/allocator-speed.md).
//
// A kept state stands for a replay in another capacity only where that replay would have made the same
// choices up to there (planner/allocator/capacity_checks.hpp): the replay kept had freed no cached segment,
// failed no check and not run out, and the new capacity holds what it had reserved. A hash of the prefix
// finds a candidate; the candidate's events and sizes are then compared with the program's one by one
// (same_prefix_content), so the hash decides nothing. With the default three steps the fixed point loses
// nothing by it: the only repeat a resumed replay goes without (a step's third micro-batch) ends at the
// prefix's end; with two, the last step's repeat starts before it and is replayed instead.
//
// Bounded in bytes (each state is a copy of the allocator and the slots' handles); the least recently used
// goes first. Not shared between threads: each worker's program cache holds one.
class prefix_checkpoints {
 public:
  struct kept {
    std::uint64_t hash = 0;  // prefix_content_hash's
    replay_checkpoint state;  // before event state.next_event, the prefix's end
    reserved_path path;       // where the reservations grew before it
    // The program it was replayed from: its events (shared) and sizes, to compare a later program's prefix.
    replay_program program;
    bool expandable = false;  // which of the state's allocators holds it
    std::uint64_t bytes = 0;  // about, against the bound
  };
  static constexpr std::uint64_t default_bound_bytes = 32ull << 20;
  explicit prefix_checkpoints(std::uint64_t bound_bytes = default_bound_bytes) : bound_bytes_(bound_bytes) {}

  // A state kept for p's prefix (p.prefix_end events, hashing to `hash`: prefix_content_hash), usable in
  // `capacity_bytes` (the allocator's, workspaces included); null if none.
  const kept* find(const replay_program& p, std::uint64_t hash, std::uint64_t capacity_bytes);
  // Whether a state for p's prefix is kept already, usable or not in this replay's capacity (then the replay
  // need not keep another).
  bool has(const replay_program& p, std::uint64_t hash) const;
  void keep(kept&& k);

  std::uint64_t resumed() const { return resumed_; }
  std::uint64_t kept_count() const { return kept_; }

 private:
  static bool same_prefix(const kept& k, const replay_program& p);  // k was kept for p's prefix
  using list = std::list<kept>;  // most recently used first
  list order_;
  std::unordered_multimap<std::uint64_t, list::iterator> by_hash_;
  std::uint64_t bound_bytes_, bytes_ = 0, resumed_ = 0, kept_ = 0;
};

// replay_schedule_reference's result for the schedule the program was compiled from, faster.
allocator_replay replay_compiled(const replay_program& program, const replay_options& options = {});

// What this thread's replays did so far (plan bench --planner reads them around the replays it times).
struct replay_counters {
  std::uint64_t replays = 0, events_replayed = 0, events_skipped = 0;
  std::uint64_t replays_recalled = 0;  // asked for and answered by an equal replay made before (known_replays.hpp)
};
replay_counters& thread_replay_counters();

}  // namespace trainplan
