// Compiled replay programs shared by content (program_cache.hpp): the key written out field by field, a hash
// of it to find candidates, the whole key compared on a hit.
#include "planner/allocator/program_cache.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace trainplan {
namespace {

// A field added to these is a field the key must hold: update key_of_inventory, then the sizes here.
static_assert(sizeof(void*) != 8 || (sizeof(tensor_spec) == 176 && sizeof(inventory) == 248 && sizeof(backward_step) == 56 &&
                                     sizeof(backward_program) == 32 && sizeof(event_interval) == 32),
              "inventory changed: write its new fields into the program cache's key (program_cache.cpp)");

void put_text(std::string_view s, std::vector<std::uint64_t>& out) {
  out.push_back(s.size());
  for (std::size_t at = 0; at < s.size(); at += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, s.data() + at, std::min<std::size_t>(8, s.size() - at));
    out.push_back(word);
  }
}

void put_signed(std::int64_t v, std::vector<std::uint64_t>& out) { out.push_back(static_cast<std::uint64_t>(v)); }

// `sizes`: with each tensor's shape, dtype and bytes (the full key), or without them (the structure key).
void put_tensors(const std::vector<tensor_spec>& tensors, bool sizes, std::vector<std::uint64_t>& out) {
  out.push_back(tensors.size());
  for (const tensor_spec& t : tensors) {
    put_text(t.name, out);
    out.push_back(t.shape.rank);
    if (sizes) {
      out.insert(out.end(), t.shape.dims.begin(), t.shape.dims.end());
      out.insert(out.end(), {static_cast<std::uint64_t>(t.type), t.bytes});
    }
    out.insert(out.end(), {static_cast<std::uint64_t>(t.category),
                           static_cast<std::uint64_t>(t.lifetime), static_cast<std::uint64_t>(t.role),
                           static_cast<std::uint64_t>(t.scope), std::uint64_t{t.per_layer}, t.layer_begin, t.layer_end,
                           std::uint64_t{t.kept_to_backward}, std::uint64_t{t.momentary}, std::uint64_t{t.replayed},
                           t.allocations, t.freed_after, static_cast<std::uint64_t>(t.interval_count)});
    for (const event_interval& iv : t.intervals)
      for (const std::int64_t v : {iv.first_base, iv.first_step, iv.last_base, iv.last_step}) put_signed(v, out);
  }
}

std::uint64_t hash_words(const std::vector<std::uint64_t>& words) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ words.size();
  for (const std::uint64_t w : words) {
    h ^= w * 0xff51afd7ed558ccdull;
    h = (h << 29 | h >> 35) * 0xc4ceb9fe1a85ec53ull;
  }
  return h ^ (h >> 32);
}

std::uint64_t entry_bytes(const program_cache::entry& e) {
  // (Its events are counted where they were compiled: program_cache::get.)
  return e.program.sizes.capacity() * sizeof(std::uint64_t) +
         (e.inv.tensors.capacity() + e.inv.host_tensors.capacity()) * sizeof(tensor_spec) + sizeof(program_cache::entry);
}

}  // namespace

void schedule_settings::apply(allocator_schedule& s) const {
  s.expandable_segments = expandable_segments;
  s.gpu_total_bytes = gpu_total_bytes;
  s.workspace_bytes = workspace_bytes;
  s.lt_workspace_bytes = lt_workspace_bytes;
  s.lt_after = lt_after;
}

namespace {

// The key's words; without `sizes`, the structure key (no settings, no shapes, dtypes or byte counts).
void write_key(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum, const schedule_settings* settings,
               int steps, std::vector<std::uint64_t>& out) {
  const bool sizes = settings != nullptr;
  out.clear();
  // What schedule_allocations reads of the run: the micro-batches it replays (allocator_schedule.cpp: at most
  // three) and the steps; the facts by address.
  out.insert(out.end(), {std::uint64_t{sizes}, reinterpret_cast<std::uintptr_t>(&facts), std::min<std::uint64_t>(grad_accum, 3),
                         static_cast<std::uint64_t>(steps)});
  // The settings; the GPU's memory only where it sizes the expandable segments' address space.
  if (sizes)
    out.insert(out.end(), {std::uint64_t{settings->expandable_segments}, settings->expandable_segments ? settings->gpu_total_bytes : 0,
                           settings->workspace_bytes, settings->lt_workspace_bytes, std::uint64_t{settings->lt_after[0]},
                           std::uint64_t{settings->lt_after[1]}});
  // Every field of the inventory.
  out.insert(out.end(), {inv.layers, inv.dense_layers, static_cast<std::uint64_t>(inv.events_per_micro_batch)});
  put_tensors(inv.tensors, sizes, out);
  put_tensors(inv.host_tensors, sizes, out);
  out.push_back(inv.adapter_layer_tensors.size());
  out.insert(out.end(), inv.adapter_layer_tensors.begin(), inv.adapter_layer_tensors.end());
  out.insert(out.end(), {inv.adapter_qkv_modules, std::uint64_t{inv.forward_in_program_order}});
  put_text(inv.coarse_forward_reason, out);
  for (const backward_program& bp : inv.backward_programs) {
    out.insert(out.end(), {static_cast<std::uint64_t>(bp.event), bp.count, bp.holds});
    for (std::size_t k = 0; k < bp.count; ++k) {
      const backward_step& st = bp.steps[k];
      out.insert(out.end(), {static_cast<std::uint64_t>(st.kind), st.when_all, st.when_none});
      put_text(st.tensor, out);
      put_text(st.part, out);
    }
  }
  put_text(inv.coarse_backward_reason, out);
  if (sizes) out.insert(out.end(), {inv.activations_per_layer_bytes, inv.activations_all_layers_bytes});
}

}  // namespace

void program_cache_key(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum,
                       const schedule_settings& settings, int steps, std::vector<std::uint64_t>& out) {
  write_key(inv, facts, grad_accum, &settings, steps, out);
}

void schedule_structure_key(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum, int steps,
                            std::vector<std::uint64_t>& out) {
  write_key(inv, facts, grad_accum, nullptr, steps, out);
}

std::uint64_t program_cache::build_program(entry& made, const model_facts& facts, std::uint64_t grad_accum,
                                           const schedule_settings& settings, int steps, std::unique_ptr<structure>& kept) {
  // A schedule whose inventory differed only in sizes: its operations, with these sizes (resize_schedule).
  schedule_structure_key(made.inv, facts, grad_accum, steps, structure_key_);
  structure_hash_ = hash_words(structure_key_);
  structure* like = nullptr;
  for (auto [it, end] = structures_.equal_range(structure_hash_); it != end && !like; ++it)
    if (it->second->key == structure_key_) like = it->second.get();
  allocator_schedule schedule;
  if (like) {
    ++structures_shared_;
    schedule = resize_schedule(like->schedule, made.inv, facts, false);  // the operations only if compiled
  } else {
    schedule = schedule_allocations(made.inv, facts, grad_accum, steps);
  }
  settings.apply(schedule);
  // The structure's program compiled for this pattern of pieces, if any (refill_program).
  const structure::compiled* same_pattern = nullptr;
  if (like) {
    schedule_pattern(schedule, pattern_);
    for (const structure::compiled& c : like->programs)
      if (c.origins.pattern == pattern_) same_pattern = &c;
  }
  std::uint64_t bytes = 0;
  if (same_pattern && refill_program(same_pattern->program, same_pattern->origins, schedule, made.program)) {
    ++programs_refilled_;
  } else {
    // Compiled, and kept for the next of its pattern: in a new structure, or in this one while it has room.
    if (like) schedule.ops = like->schedule.ops;
    structure* into = like;
    if (!like) kept = std::make_unique<structure>(), into = kept.get();
    if (into->programs.size() < structure::max_patterns) {
      structure::compiled& c = into->programs.emplace_back();
      made.program = compile_schedule(schedule, &c.origins);
      c.program = made.program;
      c.program.inv = nullptr;  // only its events are read again
      bytes += c.origins.pattern.capacity() * sizeof(std::uint64_t);
    } else {
      made.program = compile_schedule(schedule);
    }
    bytes += made.program.events().capacity() * sizeof(replay_program::event);
  }
  if (kept) {
    kept->key = structure_key_;
    kept->schedule.instances = schedule.instances;
    kept->schedule.ops = std::move(schedule.ops);  // the schedule is compiled: only the operations are kept
    kept->schedule.allocated = std::move(schedule.allocated);
    kept->schedule.workspace_ops = schedule.workspace_ops;
    kept->schedule.step_ops = std::move(schedule.step_ops);
    kept->schedule.micro_batches = schedule.micro_batches;
    kept->schedule.micro_batch_ops = std::move(schedule.micro_batch_ops);
    bytes += kept->schedule.ops.capacity() * sizeof(allocator_schedule::op) + kept->key.capacity() * sizeof(std::uint64_t) +
             kept->schedule.allocated.capacity() * sizeof(std::uint32_t);
  }
  return bytes;
}

program_cache::entry& program_cache::get(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum,
                                         const schedule_settings& settings, int steps) {
  program_cache_key(inv, facts, grad_accum, settings, steps, key_);
  const std::uint64_t hash = hash_words(key_);
  for (auto [it, end] = keys_.equal_range(hash); it != end; ++it)
    if (it->second.key == key_) {
      ++hits_;
      return *it->second.program;
    }
  ++misses_;
  auto made = std::make_unique<entry>();
  made->inv = inv;
  std::unique_ptr<structure> kept;  // a new structure, kept below
  std::uint64_t bytes = build_program(*made, facts, grad_accum, settings, steps, kept);
  // An earlier entry whose program replays alike: this key shares it, and the entry built is dropped (its
  // compiled events, if its structure keeps them, stay).
  const std::uint64_t content = program_content_hash(made->program);
  entry* same = nullptr;
  for (auto [it, end] = contents_.equal_range(content); it != end && !same; ++it)
    if (same_program_content(it->second->program, made->program)) same = it->second;
  if (same) ++contents_shared_;
  else bytes += entry_bytes(*made);
  bytes += key_.capacity() * sizeof(std::uint64_t) + sizeof(keyed);
  if (bytes_ + bytes > bound_bytes_) {  // start over
    keys_.clear(), contents_.clear(), structures_.clear(), entries_.clear(), bytes_ = 0;
    same = nullptr;
  }
  bytes_ += bytes;
  if (kept) structures_.emplace(structure_hash_, std::move(kept));
  if (!same) {
    same = entries_.emplace_back(std::move(made)).get();
    contents_.emplace(content, same);
  }
  keys_.emplace(hash, keyed{key_, same});
  return *same;
}

}  // namespace trainplan
