// A schedule compiled into a flat program of allocator events and replayed (replay_program.hpp): the same calls,
// in the same order, as replay_schedule_reference makes, and the fixed point that leaves out a repeated last step.
#include "planner/allocator/replay_program.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "planner/allocator/caching_allocator.hpp"
#include "planner/allocator/fast_caching_allocator.hpp"
#include "planner/allocator/fast_expandable_allocator.hpp"

namespace trainplan {
namespace {

// Whether events [begin, end) repeat [from, begin) (replay_program.hpp): the same requests in the same order,
// each free of the block made at the same place in the range before, or of the same older block. `at_any_size`:
// the same pieces of the same buffers, which repeat whatever their sizes; otherwise the same bytes.
bool range_repeats(const replay_program& p, const replay_program::repeat_range& r, bool at_any_size) {
  const std::vector<replay_program::event>& events = p.events();
  const std::size_t length = r.begin - r.from;
  if (length == 0 || r.end - r.begin != length || r.end > events.size()) return false;
  // A slot of the range before: its counterpart in the later. Kept all ~0u between calls: only the entries this
  // call set are reset (a whole program's slots, several ranges a program, were a fiftieth of a search's time).
  thread_local std::vector<std::uint32_t> made_as;
  if (made_as.size() < p.slots) made_as.resize(p.slots, ~0u);
  std::size_t k = 0;
  for (; k < length; ++k) {
    const replay_program::event &a = events[r.from + k], &b = events[r.begin + k];
    const bool same_request = at_any_size ? a.size == b.size : p.bytes(a) == p.bytes(b);
    if (!same_request || a.what != b.what || a.stop_check != b.stop_check || a.workspace != b.workspace) break;
    if (a.size != replay_program::free_size) {
      made_as[a.slot] = b.slot;
    } else if (b.slot != (made_as[a.slot] != ~0u ? made_as[a.slot] : a.slot)) {
      break;
    }
  }
  for (std::size_t j = 0; j < k; ++j)
    if (events[r.from + j].size != replay_program::free_size) made_as[events[r.from + j].slot] = ~0u;
  return k == length;
}

// The candidates that repeat in p, kept in p.repeats; with `at_any_size` (by candidate: those known to repeat
// whatever the sizes), only the others are compared.
void keep_repeating(replay_program& p, const std::vector<replay_program::repeat_range>& candidates,
                    const std::vector<bool>* at_any_size = nullptr) {
  p.repeats.clear();
  for (std::size_t c = 0; c < candidates.size(); ++c)
    if ((at_any_size && (*at_any_size)[c]) || range_repeats(p, candidates[c], false)) p.repeats.push_back(candidates[c]);
}

// The program's table of request sizes (replay_program::sizes): a free's 0, the two workspaces, then each
// buffer's pieces in turn. `first` (optional): by buffer, the index of its first piece.
void size_table(const allocator_schedule& s, std::vector<std::uint64_t>& out, std::vector<std::uint32_t>* first = nullptr) {
  out.assign({0, s.workspace_bytes, s.lt_workspace_bytes});
  if (first) first->clear();
  for (const std::vector<std::uint64_t>& pieces : s.sizes) {
    if (first) first->push_back(static_cast<std::uint32_t>(out.size()));
    out.insert(out.end(), pieces.begin(), pieces.end());
  }
  if (out.size() >= (1ull << 32)) throw std::length_error("replay program: more than 2^32 tensor pieces");
}

}  // namespace

// The words compile_schedule's order of events depends on beyond the operations: for each buffer its count of
// pieces and, for each piece, whether it is empty (no event) or placed apart (allocated by a backward step of
// its own); the workspaces made; the instances. (Not the operations: refill_program's caller vouches for them.)
void schedule_pattern(const allocator_schedule& s, std::vector<std::uint64_t>& out) {
  out.clear();
  out.insert(out.end(), {s.instances, s.workspace_bytes > 0, s.lt_workspace_bytes > 0, s.lt_after[0],
                         s.lt_after[1], s.workspace_ops[0], s.workspace_ops[1]});
  for (std::size_t t = 0; t < s.sizes.size(); ++t) {
    const std::vector<std::uint64_t>& sizes = s.sizes[t];
    const std::vector<bool>& placed = t < s.placed.size() ? s.placed[t] : std::vector<bool>{};
    out.push_back(sizes.size() << 32 | placed.size());
    for (std::size_t k = 0; k < sizes.size(); ++k)
      out.push_back((sizes[k] == 0 ? 1u : 0u) | (k < placed.size() && placed[k] ? 2u : 0u));
  }
}

bool refill_program(const replay_program& like, const program_origins& origins, const allocator_schedule& s,
                    replay_program& out) {
  thread_local std::vector<std::uint64_t> pattern;
  schedule_pattern(s, pattern);
  if (pattern != origins.pattern || origins.repeats_at_any_size.size() != origins.repeat_candidates.size()) return false;
  out.inv = s.inv;
  out.workspace_bytes = s.workspace_bytes;
  out.expandable_segments = s.expandable_segments;
  out.gpu_total_bytes = s.gpu_total_bytes;
  out.slots = like.slots;
  out.shared_events = like.shared_events;
  out.prefix_end = like.prefix_end;
  size_table(s, out.sizes);  // the same pattern: the same pieces, so the same places in the table
  keep_repeating(out, origins.repeat_candidates, &origins.repeats_at_any_size);
  return true;
}

replay_program compile_schedule(const allocator_schedule& s, program_origins* origins) {
  replay_program p;
  p.inv = s.inv;
  p.workspace_bytes = s.workspace_bytes;
  p.expandable_segments = s.expandable_segments;
  p.gpu_total_bytes = s.gpu_total_bytes;
  std::vector<std::uint32_t> first_piece;  // by buffer: its first piece's place in p.sizes
  size_table(s, p.sizes, &first_piece);
  // At most: each allocation's pieces, made and freed once each, and the workspaces (a vector grown by doubling
  // copied its events over again: a sixth of a search's time).
  std::size_t most_events = 8;
  for (const allocator_schedule::op& o : s.ops)
    if (!o.free) most_events += 2 * (o.piece >= 0 ? 1 : s.sizes[o.tensor].size());
  std::vector<replay_program::event> events;
  events.reserve(most_events);
  // By instance, the slots of its blocks in the order they were made: a list threaded through the slots
  // (first, last by instance; next by slot), not a vector per instance (their heap traffic was a tenth of a
  // search's time).
  constexpr std::uint32_t none = ~0u;
  std::vector<std::uint32_t> first_slot(s.instances, none), last_slot(s.instances, none), next_slot;
  next_slot.reserve(most_events / 2 + 8);
  auto step_of = [](int step) {
    if (step < -1 || step > INT16_MAX) throw std::length_error("replay program: more than 32,767 steps");
    return static_cast<std::int16_t>(step);
  };
  auto allocate = [&](std::uint32_t size, std::uint32_t what, std::int16_t step, bool stop_check, bool workspace) {
    events.push_back({size, p.slots, what, step, stop_check, workspace});
    next_slot.push_back(none);
    return p.slots++;
  };
  // As replay_through's make_workspace: the cuBLAS workspace, then its thread's cuBLASLt one where it runs a
  // GEMM with a bias. The replay may stop only after the whole group (`last`).
  std::size_t workspaces_count = 0, workspaces_made = 0;
  auto make_workspace = [&](bool last) {
    allocate(replay_program::cublas_size, replay_program::cublas_workspace, 0, false, true);
    ++workspaces_made;
    if (workspaces_count < 2 && s.lt_after[workspaces_count] && s.lt_workspace_bytes > 0)
      allocate(replay_program::cublaslt_size, replay_program::cublaslt_workspace, 0, false, false);
    ++workspaces_count;
    events.back().stop_check = last;
  };
  std::vector<std::size_t> step_begin;  // by step: its first event
  std::vector<std::size_t> micro_batch_begin;  // as s.micro_batch_ops, in events
  std::size_t next_step = 0, next_micro_batch = 0;
  for (std::size_t n = 0; n < s.ops.size(); ++n) {
    for (; next_step < s.step_ops.size() && s.step_ops[next_step] <= n; ++next_step) step_begin.push_back(events.size());
    for (; next_micro_batch < s.micro_batch_ops.size() && s.micro_batch_ops[next_micro_batch] <= n; ++next_micro_batch)
      micro_batch_begin.push_back(events.size());
    if (s.workspace_bytes > 0 && (n == s.workspace_ops[0] || n == s.workspace_ops[1])) {
      if (s.workspace_ops[0] == s.workspace_ops[1]) make_workspace(false);  // an empty forward: both here
      make_workspace(true);
    }
    const allocator_schedule::op& o = s.ops[n];
    const std::int16_t step = step_of(o.step);
    if (o.free) {
      for (std::uint32_t slot = first_slot[o.instance]; slot != none; slot = next_slot[slot])
        events.push_back({replay_program::free_size, slot, o.tensor, step, false, false});
      first_slot[o.instance] = last_slot[o.instance] = none;
      continue;
    }
    const std::vector<std::uint64_t>& sizes = s.sizes[o.tensor];
    const std::vector<bool>& placed = s.placed[o.tensor];
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const bool placed_apart = k < placed.size() && placed[k];  // allocated by a backward step of its own
      if (sizes[k] == 0 || (o.piece >= 0 ? k != static_cast<std::size_t>(o.piece) : placed_apart)) continue;
      const std::uint32_t slot = allocate(first_piece[o.tensor] + static_cast<std::uint32_t>(k), o.tensor, step, true, false);
      if (last_slot[o.instance] == none) first_slot[o.instance] = slot;
      else next_slot[last_slot[o.instance]] = slot;
      last_slot[o.instance] = slot;
    }
  }
  for (; next_step < s.step_ops.size(); ++next_step) step_begin.push_back(events.size());
  for (; next_micro_batch < s.micro_batch_ops.size(); ++next_micro_batch) micro_batch_begin.push_back(events.size());
  if (s.workspace_bytes > 0 && s.workspace_ops[1] >= s.ops.size())
    while (workspaces_made < 2) make_workspace(true);  // the schedule ended before them
  const std::size_t event_count = events.size();
  // The first optimizer step's first event (micro_batch_begin holds each step's micro-batches' starts and then its
  // optimizer's).
  if (micro_batch_begin.size() > s.micro_batches) p.prefix_end = micro_batch_begin[s.micro_batches];
  p.shared_events = std::make_shared<const std::vector<replay_program::event>>(std::move(events));
  // The fixed point's candidates, in order of where they start: each step's third micro-batch and up against the
  // one before (the first makes the gradients, the second adds into them: micro_batch_begin holds each step's
  // micro-batches and its optimizer's start), and the last step against the one before (step_begin holds
  // steps + 1 entries, the last the end of the steps).
  std::vector<replay_program::repeat_range> candidates;
  const std::size_t per_step = s.micro_batches + 1;
  if (micro_batch_begin.size() == per_step * (step_begin.size() > 0 ? step_begin.size() - 1 : 0))
    for (std::size_t step = 0; step + 1 < step_begin.size(); ++step)
      for (std::size_t k = 2; k < s.micro_batches; ++k) {
        const std::size_t* at = &micro_batch_begin[step * per_step];
        candidates.push_back({at[k - 1], at[k], at[k + 1]});
      }
  if (step_begin.size() >= 3 && step_begin.back() == event_count)
    candidates.push_back({step_begin[step_begin.size() - 3], step_begin[step_begin.size() - 2], event_count});
  std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.from < b.from; });
  if (!origins) {
    keep_repeating(p, candidates);
    return p;
  }
  origins->repeats_at_any_size.clear();
  for (const replay_program::repeat_range& r : candidates) origins->repeats_at_any_size.push_back(range_repeats(p, r, true));
  keep_repeating(p, candidates, &origins->repeats_at_any_size);
  origins->repeat_candidates = std::move(candidates);
  schedule_pattern(s, origins->pattern);
  return p;
}

namespace {

std::string_view event_buffer_name(const replay_program& p, const replay_program::event& e) {
  if (e.what == replay_program::cublas_workspace) return "cuBLAS workspace";
  if (e.what == replay_program::cublaslt_workspace) return "cuBLASLt workspace";
  return p.inv ? std::string_view(p.inv->tensors[e.what].name) : std::string_view{};
}

// The settings, the count of events and every eighth of the first `end` events; with `records`, their steps
// and stop checks too. A candidate finder only: equal programs hash equal, and every candidate is compared
// event by event (same_events), so a sample does; hashing every event of every program built was a tenth of a
// search's time. Two lanes of multiply-xorshift, so the multiplications do not wait on each other.
std::uint64_t hash_events(const replay_program& p, std::size_t end, bool records) {
  constexpr std::uint64_t k0 = 0xff51afd7ed558ccdull, k1 = 0xc4ceb9fe1a85ec53ull;
  constexpr std::size_t stride = 8;
  std::uint64_t lane[2] = {0x9e3779b97f4a7c15ull ^ end, std::uint64_t{p.expandable_segments} << 1 | 1};
  auto mix = [](std::uint64_t& h, std::uint64_t w, std::uint64_t k) {
    h = (h ^ w) * k;
    h ^= h >> 31;
  };
  mix(lane[0], p.expandable_segments ? p.gpu_total_bytes : 0, k0);
  mix(lane[1], p.workspace_bytes, k1);
  const std::vector<replay_program::event>& events = p.events();
  for (std::size_t k = 0; k < end; k += stride) {
    const replay_program::event& e = events[k];
    const std::uint64_t step = records ? static_cast<std::uint16_t>(e.step) : 0, stop = records && e.stop_check;
    mix(lane[0], p.bytes(e), k0);
    mix(lane[1], std::uint64_t{e.slot} << 32 | step << 2 | stop << 1 | e.workspace, k1);
  }
  std::uint64_t h = lane[0];
  mix(h, lane[1], k1);
  return h ^ (h >> 32);
}

// Names have static storage (inventory.hpp): the same literal is most often the same pointer.
bool same_name(std::string_view a, std::string_view b) { return (a.data() == b.data() && a.size() == b.size()) || a == b; }

// Whether the settings and the first `end` events (which both have) are alike; with `records`, their steps, stop
// checks and the names of the buffers they allocate too.
bool same_events(const replay_program& a, const replay_program& b, std::size_t end, bool records) {
  if (a.expandable_segments != b.expandable_segments || (a.expandable_segments && a.gpu_total_bytes != b.gpu_total_bytes) ||
      a.workspace_bytes != b.workspace_bytes)
    return false;
  const std::vector<replay_program::event>&ea = a.events(), &eb = b.events();
  const bool shared = a.shared_events == b.shared_events;  // refilled from one compiled: only sizes differ
  // (and with the same sizes too, the same events: a table is a few hundred words, the events thousands)
  const bool same_names = !records || a.inv == b.inv;
  if (shared && a.sizes == b.sizes && same_names) return true;
  for (std::size_t k = 0; k < end; ++k) {
    const replay_program::event &x = ea[k], &y = eb[k];
    if (a.bytes(x) != b.bytes(y)) return false;
    if (shared) continue;
    if (x.slot != y.slot || x.workspace != y.workspace) return false;
    if (records && (x.step != y.step || x.stop_check != y.stop_check)) return false;
    if (records && x.size != replay_program::free_size && !same_name(event_buffer_name(a, x), event_buffer_name(b, y))) return false;
  }
  // Shared events name the same buffers by index: the same names only where the inventories agree on them.
  if (records && shared && a.inv != b.inv)
    for (std::size_t k = 0; k < end; ++k)
      if (ea[k].size != replay_program::free_size && !same_name(event_buffer_name(a, ea[k]), event_buffer_name(b, ea[k]))) return false;
  return true;
}

}  // namespace

std::uint64_t program_content_hash(const replay_program& p) { return hash_events(p, p.events().size(), true); }

bool same_program_content(const replay_program& a, const replay_program& b) {
  return a.slots == b.slots && a.events().size() == b.events().size() && same_events(a, b, a.events().size(), true);
}

std::uint64_t prefix_content_hash(const replay_program& p, std::size_t end) {
  return hash_events(p, std::min(end, p.events().size()), false);
}

bool same_prefix_content(const replay_program& a, const replay_program& b, std::size_t end) {
  return end <= a.events().size() && end <= b.events().size() && same_events(a, b, end, false);
}

// The prefix checkpoints' store (replay_program.hpp).
bool prefix_checkpoints::same_prefix(const kept& k, const replay_program& p) {
  return k.expandable == p.expandable_segments && k.state.next_event == p.prefix_end &&
         same_prefix_content(k.program, p, p.prefix_end);  // the hash only found it
}

const prefix_checkpoints::kept* prefix_checkpoints::find(const replay_program& p, std::uint64_t hash, std::uint64_t capacity_bytes) {
  for (auto [it, end] = by_hash_.equal_range(hash); it != end; ++it) {
    const kept& k = *it->second;
    // Every check the prefix made passes in this capacity too (none failed: keep()'s caller keeps no other).
    const capacity_checks& checks = k.expandable ? k.state.expandable_allocator.checks() : k.state.allocator.checks();
    if (checks.passed_reserved_bytes > capacity_bytes || !same_prefix(k, p)) continue;
    order_.splice(order_.begin(), order_, it->second);  // now the most recently used
    ++resumed_;
    return &k;
  }
  return nullptr;
}

bool prefix_checkpoints::has(const replay_program& p, std::uint64_t hash) const {
  for (auto [it, end] = by_hash_.equal_range(hash); it != end; ++it)
    if (same_prefix(*it->second, p)) return true;
  return false;
}

void prefix_checkpoints::keep(kept&& k) {
  ++kept_;
  bytes_ += k.bytes;
  order_.push_front(std::move(k));
  by_hash_.emplace(order_.front().hash, order_.begin());
  while (bytes_ > bound_bytes_ && order_.size() > 1) {
    const list::iterator last = std::prev(order_.end());
    for (auto [it, end] = by_hash_.equal_range(last->hash); it != end; ++it)
      if (it->second == last) {
        by_hash_.erase(it);
        break;
      }
    bytes_ -= last->bytes;
    order_.erase(last);
  }
}

namespace {

// A checkpoint's copy of the allocator of type A (replay_checkpoint holds one of each fast twin).
// (C: replay_checkpoint, const or not.)
template <class A, class C>
auto& checkpoint_allocator(C& c) {
  if constexpr (std::is_same_v<A, fast_expandable_allocator>) return c.expandable_allocator;
  else return c.allocator;
}

// The replay through either fast twin; both copy whole (the checkpoints) and keep a comparable state (the fixed
// point).
template <class allocator>
allocator_replay run_program(allocator alloc, const replay_program& p, const replay_options& o) {
  static_assert(std::is_same_v<allocator, fast_caching_allocator> || std::is_same_v<allocator, fast_expandable_allocator>);
  // The workspaces take part (the capacity holds them too); the peaks are reported without them.
  const std::uint64_t workspaces_bytes = 2 * p.workspace_bytes;  // below 2^40 (planner/io/catalog.cpp)
  const std::uint64_t capacity = o.capacity_bytes > ~0ull - workspaces_bytes ? ~0ull : o.capacity_bytes + workspaces_bytes;
  alloc.set_capacity(capacity);
  allocator_replay result;
  std::uint64_t workspaces_made = 0;
  std::vector<typename allocator::handle> handles;
  std::size_t i = 0;
  if (o.resume) {
    alloc = checkpoint_allocator<allocator>(*o.resume);
    alloc.set_capacity(capacity);
    handles = o.resume->handles;
    i = o.resume->next_event;
    workspaces_made = o.resume->workspaces_made;
  }
  // The prefix (prefix_checkpoints, replay_program.hpp): resumed from a state kept for a program that begins alike, or this
  // replay's state kept there for the next. Its reserved path is kept with it, so this replay records one even
  // where not asked to, until then.
  const bool per_event_records = o.growth || o.events;
  reserved_path* path = o.path;
  thread_local reserved_path own_path;
  std::uint64_t prefix_hash = 0;
  bool keep_prefix = false;
  if (o.prefixes && !o.resume && !per_event_records && !o.skipped && p.prefix_end > 0 && o.save_before >= p.prefix_end) {
    prefix_hash = prefix_content_hash(p, p.prefix_end);
    if (const prefix_checkpoints::kept* k = o.prefixes->find(p, prefix_hash, capacity)) {
      alloc = checkpoint_allocator<allocator>(k->state);
      alloc.set_capacity(capacity);
      handles = k->state.handles;
      i = k->state.next_event;
      workspaces_made = k->state.workspaces_made;
      if (path) *path = k->path;
    } else if (!o.prefixes->has(p, prefix_hash)) {
      keep_prefix = true;
      if (!path) own_path.clear(), path = &own_path;
    }
  }
  handles.resize(p.slots);
  const std::size_t first = i;
  // The fixed point (replay_program.hpp): at each repeat's `from` the state is kept, at its `begin` compared, and
  // where they are equal the events up to its `end` are left out. Only the repeats this replay reaches from
  // their start (a replay resumed past a `from` goes without that one); states are kept before they are compared
  // at one event.
  struct mark {
    std::size_t event;
    std::uint32_t repeat;
    bool compare;
  };
  struct kept_state {
    std::vector<std::uint64_t> words;
    std::uint64_t releases = 0, segments = 0;
    bool taken = false;
  };
  thread_local std::vector<mark> marks;
  thread_local std::vector<kept_state> kept;
  thread_local std::vector<std::uint64_t> state_now;
  marks.clear();
  if (o.skip_repeated_step)
    for (std::uint32_t r = 0; r < p.repeats.size(); ++r)
      if (p.repeats[r].from >= i) marks.push_back({p.repeats[r].from, r, false}), marks.push_back({p.repeats[r].begin, r, true});
  std::sort(marks.begin(), marks.end(), [](const mark& a, const mark& b) {
    return a.event != b.event ? a.event < b.event : a.compare < b.compare;
  });
  if (kept.size() < p.repeats.size()) kept.resize(p.repeats.size());
  for (std::size_t r = 0; r < p.repeats.size(); ++r) kept[r].taken = false;
  std::size_t next_mark = 0, mark_event = marks.empty() ? ~std::size_t{0} : marks[0].event, skipped_events = 0;
  // A repeat that freed cached segments is left out only where nothing records the events one by one, and only
  // as the run's last step: it would free and make them again, and its growth records are the step before's.
  std::uint64_t repeated_releases = 0, repeated_segments = 0;
  const std::vector<replay_program::event>& events = p.events();
  const std::size_t count = events.size();
  for (; i < count; ++i) {
    if (o.save && i == o.save_before) {
      checkpoint_allocator<allocator>(*o.save) = alloc;
      o.save->handles = handles, o.save->next_event = i, o.save->workspaces_made = workspaces_made;
    }
    if (keep_prefix && i == p.prefix_end) {
      keep_prefix = false;
      // Only a state any capacity holding what it reserved would reach: no cached segment freed (nor in a
      // range left out), no check failed.
      if (alloc.cache_releases() == 0 && repeated_releases == 0 && !alloc.out_of_memory() && alloc.checks().failed_asked_bytes == ~0ull) {
        prefix_checkpoints::kept k;
        k.hash = prefix_hash;
        checkpoint_allocator<allocator>(k.state) = alloc;
        k.state.handles.assign(handles.begin(), handles.end());
        k.state.next_event = i, k.state.workspaces_made = workspaces_made;
        k.path = *path;
        k.program = p;
        k.program.inv = nullptr;  // the prefix's comparison reads no name
        k.expandable = std::is_same_v<allocator, fast_expandable_allocator>;
        k.bytes = sizeof(k) + alloc.memory_bytes() + k.state.handles.capacity() * sizeof(typename allocator::handle) +
                  k.path.capacity() * sizeof(k.path[0]) + k.program.sizes.capacity() * sizeof(std::uint64_t) +
                  k.program.repeats.capacity() * sizeof(replay_program::repeat_range);
        o.prefixes->keep(std::move(k));
      }
      if (path == &own_path) path = nullptr;
    }
    if (i == mark_event) {
      std::size_t jump_to = 0;
      for (; next_mark < marks.size() && marks[next_mark].event == i && jump_to == 0; ++next_mark) {
        const mark m = marks[next_mark];
        kept_state& k = kept[m.repeat];
        // The releases and segments so far, those of the ranges already left out included (a step's third
        // micro-batch inside the step the last one repeats).
        const std::uint64_t releases = alloc.cache_releases() + repeated_releases, segments = alloc.segments() + repeated_segments;
        if (!m.compare) {
          alloc.state(k.words);
          k.releases = releases, k.segments = segments, k.taken = true;
          continue;
        }
        const replay_program::repeat_range& r = p.repeats[m.repeat];
        const bool released = releases != k.releases;
        if (!k.taken || (per_event_records && (released || r.end != count))) continue;
        alloc.state(state_now);
        if (state_now != k.words) continue;
        // ... and frees and makes as many segments as the range before did.
        repeated_releases += releases - k.releases;
        repeated_segments += segments - k.segments;
        skipped_events += r.end - r.begin;
        if (o.skipped) o.skipped->push_back(m.repeat);
        jump_to = r.end;
      }
      if (jump_to > 0)  // the marks the jump passes over are not reached
        while (next_mark < marks.size() && marks[next_mark].event < jump_to) ++next_mark;
      mark_event = next_mark < marks.size() ? marks[next_mark].event : ~std::size_t{0};
      if (jump_to > 0) {
        i = jump_to - 1;  // the loop's step brings it to jump_to, whose save and marks it then takes
        continue;
      }
    }
    const replay_program::event& e = events[i];
    if (e.size == replay_program::free_size) {
      alloc.free(handles[e.slot]);
      if (o.events) o.events->push_back({alloc.allocated_bytes(), alloc.reserved_bytes(), alloc.segments()});
      continue;
    }
    const std::uint64_t bytes = p.sizes[e.size];
    const std::uint64_t before = alloc.reserved_bytes();
    const std::uint64_t peak_before = alloc.peak_reserved_bytes(), segments_before = alloc.segments();
    const std::uint64_t workspaces_before = workspaces_made;
    const bool failed_before = alloc.out_of_memory();
    handles[e.slot] = alloc.allocate(bytes, e.slot);
    if (o.events) o.events->push_back({alloc.allocated_bytes(), alloc.reserved_bytes(), alloc.segments()});
    if (e.workspace) workspaces_made += p.workspace_bytes;
    if (path && alloc.reserved_bytes() > before && alloc.cache_releases() == 0 && !alloc.out_of_memory())
      path->push_back({i, alloc.reserved_bytes()});
    if (result.first_failed_check_event == ~std::size_t{0} && alloc.checks().failed_asked_bytes != ~0ull)
      result.first_failed_check_event = i;
    const bool failed = alloc.out_of_memory() && !failed_before;
    if (failed || (o.growth && alloc.reserved_bytes() > before)) {
      const std::string_view what = event_buffer_name(p, e);
      if (failed) {
        result.failed_tensor = what, result.failed_step = e.step;
        result.reserved_before_failure_bytes = peak_before - std::min(peak_before, workspaces_before);
        result.segments_before_failure = segments_before;
      }
      // (replay_through records no growth for a buffer's allocation that fails where the replay stops.)
      const bool buffer = e.what != replay_program::cublas_workspace && e.what != replay_program::cublaslt_workspace;
      if (o.growth && alloc.reserved_bytes() > before && !(failed && buffer && o.stop_at_out_of_memory))
        o.growth->push_back({what, alloc.reserved_bytes(), e.step, alloc.reserved_bytes() - before, caching_allocator::small_pool(bytes)});
    }
    if (o.stop_at_out_of_memory && e.stop_check && alloc.out_of_memory()) {
      ++i;
      break;
    }
  }
  result.events_replayed = i - first - skipped_events;
  result.events_skipped = skipped_events;
  // Without the workspaces (never freed, so in both peaks once made; at least zero regardless).
  result.peak_allocated_bytes = alloc.peak_allocated_bytes() - std::min(alloc.peak_allocated_bytes(), workspaces_made);
  result.peak_reserved_bytes = alloc.peak_reserved_bytes() - std::min(alloc.peak_reserved_bytes(), workspaces_made);
  result.out_of_memory = alloc.out_of_memory();
  // The allocator's capacity is the caller's plus the workspaces'.
  const capacity_checks& checks = alloc.checks();
  result.same_replay_from_bytes = checks.passed_reserved_bytes - std::min(checks.passed_reserved_bytes, workspaces_bytes);
  result.same_replay_below_bytes =
      checks.failed_asked_bytes == ~0ull ? ~0ull : checks.failed_asked_bytes - std::min(checks.failed_asked_bytes, workspaces_bytes);
  result.cache_releases = alloc.cache_releases() + repeated_releases;
  result.segments_made = alloc.segments() + repeated_segments;
  return result;
}

}  // namespace

replay_counters& thread_replay_counters() {
  thread_local replay_counters counters;
  return counters;
}

allocator_replay replay_compiled(const replay_program& program, const replay_options& options) {
  const allocator_replay r = program.expandable_segments
                                 ? run_program(fast_expandable_allocator(program.gpu_total_bytes), program, options)
                                 : run_program(fast_caching_allocator(), program, options);
  replay_counters& counters = thread_replay_counters();
  ++counters.replays;
  counters.events_replayed += r.events_replayed;
  counters.events_skipped += r.events_skipped;
  return r;
}

// Declared in allocator_trace.hpp, whose callers need not know the program.
allocator_replay replay_schedule(const allocator_schedule& schedule, std::vector<allocator_growth>* growth,
                                 std::uint64_t capacity_bytes, bool stop_at_out_of_memory) {
  replay_options options;
  options.growth = growth;
  options.capacity_bytes = capacity_bytes;
  options.stop_at_out_of_memory = stop_at_out_of_memory;
  return replay_compiled(compile_schedule(schedule), options);
}

allocator_replay replay_allocator(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum, int steps,
                                  std::vector<allocator_growth>* growth, std::uint64_t capacity_bytes) {
  return replay_schedule(schedule_allocations(inv, facts, grad_accum, steps), growth, capacity_bytes);
}

}  // namespace trainplan
