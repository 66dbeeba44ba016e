#include "planner/allocator_trace.hpp"

#include <algorithm>
#include <limits>

#include "planner/caching_allocator.hpp"
#include "planner/checked_math.hpp"

namespace trainplan {
namespace {

// The parameter tensors a model-state buffer stands for (its scope), when its bytes are exactly theirs in its
// dtype; otherwise (sharded, adapters, quantized) it stays one allocation.
// A per-layer buffer stands for the tensors of the layers it covers (DeepSeek-V3's dense first layers hold
// other MLP tensors than its MoE layers).
std::vector<std::uint64_t> split_by_parameters(const tensor_spec& t, const model_facts& facts) {
  const std::uint64_t width = dtype_bytes(t.type);
  std::vector<std::uint64_t> sizes;
  auto take = [&](auto keep, std::uint64_t copies) {
    for (const param_tensor& p : facts.tensors)
      if (keep(p))
        for (std::uint64_t c = 0; c < copies; ++c) sizes.push_back(p.count * width);
  };
  auto in_range = [&](const param_tensor& p) { return facts.layers.holds(p, t.layer_begin, t.layer_end); };
  switch (t.scope) {
    case param_scope::none: break;
    case param_scope::all:
      for (const param_tensor& p : facts.tensors)
        for (std::uint64_t c = 0; c < facts.layers.instances(p); ++c) sizes.push_back(p.count * width);
      break;
    case param_scope::layer: take([&](const param_tensor& p) { return p.per_layer && in_range(p); }, 1); break;
    case param_scope::layer_matmul: take([&](const param_tensor& p) { return p.per_layer && p.matmul && in_range(p); }, 1); break;
    case param_scope::head: {
      const bool tied = std::none_of(facts.tensors.begin(), facts.tensors.end(),
                                     [](const param_tensor& p) { return p.name.starts_with("lm_head."); });
      take([tied](const param_tensor& p) {
        return p.name.starts_with("final_norm.") || p.name.starts_with("lm_head.") || (tied && p.name.starts_with("embed."));
      }, 1);
      break;
    }
    case param_scope::embedding: take([](const param_tensor& p) { return p.name.starts_with("embed."); }, 1); break;
  }
  std::uint64_t sum = 0;
  for (std::uint64_t s : sizes) sum += s;
  if (sizes.empty() || sum != t.bytes) return {t.bytes};
  return sizes;
}

struct instance {
  std::uint64_t begin, end;  // global times: allocated at begin, freed after end (end = max: never)
  std::uint32_t tensor, interval;
  std::uint64_t layer;
};

}  // namespace

allocator_replay replay_allocator(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum, int steps,
                                  std::vector<allocator_growth>* growth) {
  const std::int64_t L = static_cast<std::int64_t>(inv.layers);
  const std::uint64_t E = static_cast<std::uint64_t>(inv.events_per_micro_batch);
  // Later micro-batches repeat the second one: simulate at most three.
  const std::uint64_t mbs = std::min<std::uint64_t>(grad_accum, 3);
  const std::uint64_t per_step = mbs * E + 1;  // the events of each micro-batch, then the optimizer step
  constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();
  auto time_of = [&](int step, std::uint64_t mb, std::uint64_t e) { return 1 + static_cast<std::uint64_t>(step) * per_step + mb * E + e; };
  auto optimizer_time = [&](int step) { return 1 + static_cast<std::uint64_t>(step) * per_step + mbs * E; };
  const std::uint64_t first_backward = static_cast<std::uint64_t>(event_index(event_kind::bwd_head, 0, L));

  std::vector<instance> instances;
  for (std::uint32_t ti = 0; ti < inv.tensors.size(); ++ti) {
    const tensor_spec& t = inv.tensors[ti];
    // Per-layer buffers: one instance for each layer i that holds them.
    const std::uint64_t first_copy = t.per_layer ? t.layer_begin : 0, end_copy = t.per_layer ? t.layer_end : 1;
    for (int step = 0; step < steps; ++step) {
      switch (t.lifetime) {
        case state_lifetime::whole_run:
          if (step == 0) instances.push_back({0, never, ti, 0, 0});
          break;
        case state_lifetime::from_first_optimizer:
          if (step == 0) instances.push_back({optimizer_time(0), never, ti, 0, 0});
          break;
        case state_lifetime::optimizer_only:
          instances.push_back({optimizer_time(step), optimizer_time(step), ti, 0, 0});
          break;
        case state_lifetime::backward_to_optimizer:
          instances.push_back({time_of(step, 0, first_backward), optimizer_time(step), ti, 0, 0});
          break;
        case state_lifetime::gradient_from_backward:
          for (std::uint64_t i = first_copy; i < end_copy; ++i) {
            const std::int64_t e = t.intervals[0].first_base + t.intervals[0].first_step * static_cast<std::int64_t>(i);
            instances.push_back({time_of(step, 0, static_cast<std::uint64_t>(e)), optimizer_time(step), ti, 0, i});
          }
          break;
        case state_lifetime::micro_batch:
          for (std::uint64_t mb = 0; mb < mbs; ++mb)
            for (std::uint32_t k = 0; k < static_cast<std::uint32_t>(t.interval_count); ++k)
              for (std::uint64_t i = first_copy; i < end_copy; ++i) {
                const event_interval& iv = t.intervals[k];
                const std::int64_t si = static_cast<std::int64_t>(i);
                const std::int64_t first = iv.first_base + iv.first_step * si, last = iv.last_base + iv.last_step * si;
                if (first > last) continue;
                instances.push_back({time_of(step, mb, static_cast<std::uint64_t>(first)),
                                     time_of(step, mb, static_cast<std::uint64_t>(last)), ti, k, i});
              }
          break;
      }
    }
  }

  // Replay in time order: at each time, allocations (in inventory order, then layer order), then frees.
  struct op {
    std::uint64_t time;
    int kind;  // 0 allocate, 1 free
    std::uint64_t index;
  };
  std::vector<op> ops;
  ops.reserve(instances.size() * 2);
  for (std::uint64_t n = 0; n < instances.size(); ++n) {
    ops.push_back({instances[n].begin, 0, n});
    if (instances[n].end != never) ops.push_back({instances[n].end, 1, n});
  }
  std::stable_sort(ops.begin(), ops.end(), [](const op& a, const op& b) {
    return a.time != b.time ? a.time < b.time : a.kind < b.kind;
  });

  caching_allocator alloc;
  std::vector<std::vector<caching_allocator::handle>> handles(instances.size());
  std::vector<std::vector<std::uint64_t>> split_cache(inv.tensors.size());
  for (const op& o : ops) {
    const instance& in = instances[o.index];
    if (o.kind == 0) {
      std::vector<std::uint64_t>& sizes = split_cache[in.tensor];
      if (sizes.empty()) sizes = split_by_parameters(inv.tensors[in.tensor], facts);
      for (std::uint64_t bytes : sizes) {
        if (bytes == 0) continue;
        const std::uint64_t before = alloc.reserved_bytes();
        handles[o.index].push_back(alloc.allocate(bytes));
        if (growth && alloc.reserved_bytes() != before)
          growth->push_back({inv.tensors[in.tensor].name, alloc.reserved_bytes(),
                             in.begin == 0 ? -1 : static_cast<int>((in.begin - 1) / per_step)});
      }
    } else {
      for (caching_allocator::handle h : handles[o.index]) alloc.free(h);
      handles[o.index].clear();
    }
  }
  return {alloc.peak_allocated_bytes(), alloc.peak_reserved_bytes()};
}

}  // namespace trainplan
