// The reference replay (allocator_trace.hpp: replay_schedule_reference): each operation of a schedule in turn
// through caching_allocator or expandable_allocator, slow and plain, kept for the tests that prove the fast
// replay (replay_program.hpp) equal to it.
#include <algorithm>
#include <string_view>
#include <vector>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/allocator/caching_allocator.hpp"
#include "planner/allocator/expandable_allocator.hpp"

namespace trainplan {
namespace {

// One replay through either simulated allocator (they share the interface).
template <class allocator>
allocator_replay replay_through(allocator alloc, const allocator_schedule& schedule, std::vector<allocator_growth>* growth,
                                std::uint64_t capacity_bytes, bool stop_at_out_of_memory,
                                std::vector<allocator_event_state>* events) {
  std::uint64_t replayed = 0;
  auto record = [&] {
    ++replayed;
    if (events) events->push_back({alloc.allocated_bytes(), alloc.reserved_bytes(), alloc.segments()});
  };
  // The workspaces take part (the capacity holds them too); the peaks are reported without them.
  const std::uint64_t workspaces_bytes = 2 * schedule.workspace_bytes;  // below 2^40 (planner/io/catalog.cpp)
  alloc.set_capacity(capacity_bytes > ~0ull - workspaces_bytes ? ~0ull : capacity_bytes + workspaces_bytes);
  allocator_replay result;
  std::uint64_t workspaces_made = 0;
  std::size_t workspaces_count = 0;
  auto make_kept = [&](std::uint64_t bytes, std::string_view what) {
    const std::uint64_t before = alloc.reserved_bytes();
    const bool failed_before = alloc.out_of_memory();
    alloc.allocate(bytes);
    record();
    if (alloc.out_of_memory() && !failed_before) {
      result.failed_tensor = what;
      result.failed_step = 0;
    }
    if (growth && alloc.reserved_bytes() > before)
      growth->push_back({what, alloc.reserved_bytes(), 0, alloc.reserved_bytes() - before, caching_allocator::small_pool(bytes)});
  };
  auto make_workspace = [&] {
    make_kept(schedule.workspace_bytes, "cuBLAS workspace");
    workspaces_made += schedule.workspace_bytes;
    // The same thread's cuBLASLt workspace, where it runs a GEMM with a bias.
    if (workspaces_count < 2 && schedule.lt_after[workspaces_count] && schedule.lt_workspace_bytes > 0)
      make_kept(schedule.lt_workspace_bytes, "cuBLASLt workspace");
    ++workspaces_count;
  };
  std::vector<std::vector<typename allocator::handle>> handles(schedule.instances);
  for (std::size_t n = 0; n < schedule.ops.size(); ++n) {
    if (schedule.workspace_bytes > 0 && (n == schedule.workspace_ops[0] || n == schedule.workspace_ops[1])) {
      if (schedule.workspace_ops[0] == schedule.workspace_ops[1]) make_workspace();  // an empty forward: both here
      make_workspace();
      if (stop_at_out_of_memory && alloc.out_of_memory()) break;
    }
    const allocator_schedule::op& o = schedule.ops[n];
    std::vector<typename allocator::handle>& held = handles[o.instance];
    if (o.free) {
      for (typename allocator::handle h : held) alloc.free(h), record();
      held.clear();
      continue;
    }
    const std::vector<std::uint64_t>& sizes = schedule.sizes[o.tensor];
    const std::vector<bool>& placed = schedule.placed[o.tensor];
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::uint64_t bytes = sizes[k];
      const bool placed_apart = k < placed.size() && placed[k];  // allocated by a backward step of its own
      if (bytes == 0 || (o.piece >= 0 ? k != static_cast<std::size_t>(o.piece) : placed_apart)) continue;
      const std::uint64_t before = alloc.reserved_bytes();
      const bool failed_before = alloc.out_of_memory();
      held.push_back(alloc.allocate(bytes));
      record();
      if (alloc.out_of_memory() && !failed_before) {
        result.failed_tensor = schedule.inv->tensors[o.tensor].name;
        result.failed_step = o.step;
        if (stop_at_out_of_memory) break;
      }
      if (growth && alloc.reserved_bytes() > before)
        growth->push_back({schedule.inv->tensors[o.tensor].name, alloc.reserved_bytes(), o.step,
                           alloc.reserved_bytes() - before, caching_allocator::small_pool(bytes)});
    }
    if (stop_at_out_of_memory && alloc.out_of_memory()) break;
  }
  if (schedule.workspace_bytes > 0 && schedule.workspace_ops[1] >= schedule.ops.size() && !(stop_at_out_of_memory && alloc.out_of_memory()))
    while (workspaces_made < workspaces_bytes) make_workspace();  // the schedule ended before them
  // Without the workspaces (never freed, so in both peaks once made; at least zero regardless).
  result.peak_allocated_bytes = alloc.peak_allocated_bytes() - std::min(alloc.peak_allocated_bytes(), workspaces_made);
  result.peak_reserved_bytes = alloc.peak_reserved_bytes() - std::min(alloc.peak_reserved_bytes(), workspaces_made);
  result.out_of_memory = alloc.out_of_memory();
  result.cache_releases = alloc.cache_releases();
  result.segments_made = alloc.segments();
  result.events_replayed = replayed;
  return result;
}

}  // namespace

allocator_replay replay_schedule_reference(const allocator_schedule& schedule, std::vector<allocator_growth>* growth,
                                           std::uint64_t capacity_bytes, bool stop_at_out_of_memory,
                                           std::vector<allocator_event_state>* events) {
  if (schedule.expandable_segments)
    return replay_through(expandable_allocator(schedule.gpu_total_bytes), schedule, growth, capacity_bytes,
                          stop_at_out_of_memory, events);
  return replay_through(caching_allocator(), schedule, growth, capacity_bytes, stop_at_out_of_memory, events);
}

}  // namespace trainplan
