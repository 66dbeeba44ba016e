#include "planner/timeline.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "planner/checked_math.hpp"
#include "planner/input_error.hpp"

namespace trainplan {
namespace {

__extension__ typedef unsigned __int128 u128;  // sums of 64-bit sizes, checked once

// Number of integers i in [0, layers) with first_base + first_step*i <= e <= last_base + last_step*i.
std::uint64_t count_in_interval(const event_interval& iv, std::int64_t e, std::int64_t layers, bool per_layer) {
  std::int64_t lo = 0, hi = per_layer ? layers - 1 : 0;
  // first_base + first_step*i <= e
  if (iv.first_step == 0) { if (iv.first_base > e) return 0; }
  else if (iv.first_step > 0) hi = std::min(hi, e - iv.first_base);
  else lo = std::max(lo, iv.first_base - e);
  // last_base + last_step*i >= e
  if (iv.last_step == 0) { if (iv.last_base < e) return 0; }
  else if (iv.last_step > 0) lo = std::max(lo, e - iv.last_base);
  else hi = std::min(hi, iv.last_base - e);
  return hi >= lo ? static_cast<std::uint64_t>(hi - lo + 1) : 0;
}

// Buffers whose lifetime fields are equal are live at the same events.
bool same_lifetime(const tensor_spec& a, const tensor_spec& b) {
  auto same = [](const event_interval& x, const event_interval& y) {
    return x.first_base == y.first_base && x.first_step == y.first_step && x.last_base == y.last_base &&
           x.last_step == y.last_step;
  };
  return a.lifetime == b.lifetime && a.per_layer == b.per_layer && a.interval_count == b.interval_count &&
         same(a.intervals[0], b.intervals[0]) && same(a.intervals[1], b.intervals[1]);
}

// A hash of the lifetime fields, so that finding a buffer's group compares one number per group (equal
// lifetimes have equal hashes; a match is confirmed by same_lifetime). Independent products rather than a
// chain: it is computed for every buffer of every configuration.
std::uint64_t lifetime_hash(const tensor_spec& t) {
  auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const event_interval& a = t.intervals[0];
  const event_interval& b = t.intervals[1];
  return (static_cast<std::uint64_t>(t.lifetime) << 8 | static_cast<std::uint64_t>(t.per_layer) << 4 |
          static_cast<std::uint64_t>(t.interval_count)) * 0x9e3779b97f4a7c15ull +
         u(a.first_base) * 0xc2b2ae3d27d4eb4full + u(a.first_step) * 0x165667b19e3779f9ull +
         u(a.last_base) * 0xd6e8feb86659fd93ull + u(a.last_step) * 0xff51afd7ed558ccdull +
         u(b.first_base) * 0xc4ceb9fe1a85ec53ull + u(b.first_step) * 0x94d049bb133111ebull +
         u(b.last_base) * 0xbf58476d1ce4e5b9ull + u(b.last_step) * 0x27d4eb2f165667c5ull;
}

// A visited event: point p at micro-batch event e, as the lifetime rules read it.
struct live_context {
  bool optimizer;          // p.kind == event_kind::optimizer
  bool later_micro_batch;  // p.micro_batch > 0
  bool later_step;         // p.step > 1
  std::int64_t e, first_backward, L;
};

// Instances of buffer `k` live at a visited event. Whole-run state is always live; gradients from the
// first backward event of a step's first micro-batch until the optimizer step ends; optimizer state from
// step 1's optimizer step on; activations by their event intervals.
inline std::uint64_t instances_of(const tensor_spec& k, const live_context& at) {
  switch (k.lifetime) {
    case state_lifetime::whole_run: return 1;
    case state_lifetime::backward_to_optimizer:
      return at.optimizer || at.later_micro_batch || at.e >= at.first_backward ? 1 : 0;
    case state_lifetime::from_first_optimizer: return at.later_step || at.optimizer ? 1 : 0;
    case state_lifetime::optimizer_only: return at.optimizer ? 1 : 0;
    case state_lifetime::micro_batch: {
      if (at.optimizer) return 0;
      std::uint64_t n = 0;
      for (int i = 0; i < k.interval_count; ++i) n += count_in_interval(k.intervals[i], at.e, at.L, k.per_layer);
      return n;
    }
    case state_lifetime::gradient_from_backward: {
      if (at.optimizer || at.later_micro_batch) return k.per_layer ? static_cast<std::uint64_t>(at.L) : 1;
      const event_interval from_then_on{k.intervals[0].first_base, k.intervals[0].first_step,
                                        std::numeric_limits<std::int64_t>::max() / 4, 0};
      return count_in_interval(from_then_on, at.e, at.L, k.per_layer);
    }
  }
  return 0;
}

live_context context_of(const timeline_point& p, std::int64_t e, std::int64_t first_backward, std::int64_t L) {
  return {p.kind == event_kind::optimizer, p.micro_batch > 0, p.step > 1, e, first_backward, L};
}

// Instances of `t` live at point `p` (micro-batch event `e`).
std::uint64_t instances_at(const tensor_spec& t, const timeline_point& p, std::int64_t first_backward, std::int64_t e,
                           std::int64_t L) {
  return instances_of(t, context_of(p, e, first_backward, L));
}

struct event_id {
  event_kind kind;
  std::uint64_t layer;
};

event_id event_at(std::int64_t e, std::int64_t L) {
  if (e == 0) return {event_kind::fwd_embed, 0};
  if (e <= L) return {event_kind::fwd_layer, static_cast<std::uint64_t>(e - 1)};
  if (e == L + 1) return {event_kind::fwd_head, 0};
  if (e == L + 2) return {event_kind::loss, 0};
  if (e == L + 3) return {event_kind::bwd_head, 0};
  if (e <= 2 * L + 3) return {event_kind::bwd_layer, static_cast<std::uint64_t>(2 * L + 3 - e)};
  return {event_kind::bwd_embed, 0};
}

}  // namespace

std::uint64_t instances_live(const tensor_spec& t, std::int64_t event, std::int64_t layers) {
  std::uint64_t n = 0;
  for (int k = 0; k < t.interval_count; ++k) n += count_in_interval(t.intervals[k], event, layers, t.per_layer);
  return n;
}

std::string phase_name(const timeline_point& p) {
  switch (p.kind) {
    case event_kind::fwd_embed: return "forward embedding";
    case event_kind::fwd_layer: return fmt::format("forward layer {}", p.layer);
    case event_kind::fwd_head: return "forward head (final norm, output projection)";
    case event_kind::loss: return "loss (cross-entropy forward and backward)";
    case event_kind::bwd_head: return "backward head";
    case event_kind::bwd_layer: return fmt::format("backward layer {}", p.layer);
    case event_kind::bwd_embed: return "backward embedding";
    case event_kind::optimizer: return "optimizer step";
  }
  return "?";
}

std::string describe_point(const timeline_point& p, std::uint64_t grad_accum) {
  std::string step = p.step == 1 ? "step 1" : "step 2 and later";
  if (p.kind == event_kind::optimizer) return fmt::format("{}, {}", step, phase_name(p));
  std::string mb;
  if (grad_accum == 1) mb = "";
  else if (p.micro_batch == 0) mb = fmt::format(", micro-batch 1 of {}", grad_accum);
  else if (grad_accum == 2) mb = ", micro-batch 2 of 2";
  else mb = fmt::format(", micro-batches 2-{} of {}", grad_accum, grad_accum);
  return fmt::format("{}{}, {}", step, mb, phase_name(p));
}

timeline_result walk_timeline(const inventory& inv, std::uint64_t grad_accum, timeline_detail detail) {
  const std::int64_t L = static_cast<std::int64_t>(inv.layers);
  const std::int64_t first_backward = event_index(event_kind::bwd_head, 0, L);
  const bool keep_points = detail == timeline_detail::every_event;
  timeline_result out;
  bool have_peak = false;

  // Buffers with the same lifetime are live together: visit each such group once (an hf layer's two dozen
  // saved tensors are one group). The peak is found on each group's total bytes; the bytes by category are
  // summed once, at the peak (integer sums: the same in any order).
  struct lifetime_group {
    const tensor_spec* like;  // the group's first buffer
    u128 bytes;               // every category
  };
  // On the stack for the usual inventory (under 96 buffers): a sweep walks millions of them.
  std::array<lifetime_group, 96> group_storage;
  std::vector<lifetime_group> group_overflow;
  std::array<std::uint64_t, 96> hash_storage;  // each group's lifetime_hash, scanned to find a buffer's group
  std::vector<std::uint64_t> hash_overflow;
  lifetime_group* groups = group_storage.data();
  std::uint64_t* hashes = hash_storage.data();
  std::size_t group_count = 0;
  if (inv.tensors.size() > group_storage.size()) {
    group_overflow.resize(inv.tensors.size());
    hash_overflow.resize(inv.tensors.size());
    groups = group_overflow.data();
    hashes = hash_overflow.data();
  }
  // Which group each buffer joined, for the breakdown by category at the peak (bounded like the groups).
  std::array<std::uint8_t, 96> member_storage;
  std::vector<std::uint32_t> member_overflow;
  const bool small = inv.tensors.size() <= member_storage.size();
  if (!small) member_overflow.resize(inv.tensors.size());
  std::size_t index = 0;
  for (const tensor_spec& t : inv.tensors) {
    const std::uint64_t hash = lifetime_hash(t);
    std::size_t g = 0;
    while (g < group_count && !(hashes[g] == hash && same_lifetime(*groups[g].like, t))) ++g;
    if (g == group_count) {
      hashes[group_count] = hash;
      groups[group_count++] = {&t, t.bytes};
    } else {
      groups[g].bytes += t.bytes;
    }
    if (small) member_storage[index++] = static_cast<std::uint8_t>(g);
    else member_overflow[index++] = static_cast<std::uint32_t>(g);
  }

  std::int64_t peak_event = 0;
  auto visit = [&](timeline_point p, std::int64_t e) {
    const live_context at = context_of(p, e, first_backward, L);
    u128 live = 0;  // summed in 128 bits and checked once (sizes are each below 2^64)
    for (std::size_t g = 0; g < group_count; ++g)
      live += static_cast<u128>(instances_of(*groups[g].like, at)) * groups[g].bytes;  // < 2^64 x 2^70: no overflow
    if (live > std::numeric_limits<std::uint64_t>::max()) throw input_error("live bytes are larger than 64 bits can hold");
    p.live_bytes = static_cast<std::uint64_t>(live);
    if (keep_points) out.points.push_back(p);
    if (!have_peak || p.live_bytes > out.peak.live_bytes) {
      out.peak = p;
      peak_event = e;
      have_peak = true;
    }
  };
  auto visit_event = [&](int step, std::uint64_t mb, event_kind kind, std::int64_t layer) {
    visit({step, mb, kind, static_cast<std::uint64_t>(layer), 0},
          kind == event_kind::optimizer ? inv.events_per_micro_batch : event_index(kind, layer, L));
  };

  const std::uint64_t micro_batches = grad_accum > 1 ? 2 : 1;
  if (keep_points) {
    for (int step = 1; step <= 2; ++step) {
      for (std::uint64_t mb = 0; mb < micro_batches; ++mb)
        for (std::int64_t e = 0; e < inv.events_per_micro_batch; ++e) {
          event_id id = event_at(e, L);
          visit({step, mb, id.kind, id.layer, 0}, e);
        }
      visit({step, micro_batches - 1, event_kind::optimizer, 0, 0}, inv.events_per_micro_batch);
    }
  } else {
    bool optimizer_state = false, grads_per_layer = false;
    for (const tensor_spec& t : inv.tensors) {
      optimizer_state = optimizer_state || (t.lifetime == state_lifetime::from_first_optimizer && t.bytes > 0);
      grads_per_layer = grads_per_layer || t.lifetime == state_lifetime::gradient_from_backward;
    }
    const int step = optimizer_state ? 2 : 1;
    const std::uint64_t last_mb = micro_batches - 1;
    // The embedding's forward holds a strict subset of what the last layer's forward holds (its buffers
    // live on through the layers), and its backward a strict subset of the last layer's backward; step
    // 2's optimizer step holds what step 1's does. None of them can be the first peak.
    if (optimizer_state) visit_event(1, last_mb, event_kind::optimizer, 0);
    auto forward = [&] {
      visit_event(step, last_mb, event_kind::fwd_layer, L - 1);
      visit_event(step, last_mb, event_kind::fwd_head, 0);
      visit_event(step, last_mb, event_kind::loss, 0);
    };
    auto backward = [&](std::uint64_t mb) {
      visit_event(step, mb, event_kind::bwd_head, 0);
      visit_event(step, mb, event_kind::bwd_layer, L - 1);
      if (grads_per_layer) {
        // Gradients that appear layer by layer make the backward's live bytes linear in the layers done
        // (each layer frees what it saved and adds its gradients), so the largest is at either end.
        visit_event(step, mb, event_kind::bwd_layer, 0);
        visit_event(step, mb, event_kind::bwd_embed, 0);
      }
    };
    if (micro_batches == 1) {
      forward(), backward(0);
    } else {
      backward(0), forward();  // micro-batch 1's backward comes first in time, then micro-batch 2's forward
      // With gradients appearing layer by layer, a later micro-batch's backward holds more than the first's
      // (every gradient exists already), so it is visited too, after its forward.
      if (grads_per_layer) backward(last_mb);
    }
    if (!optimizer_state) visit_event(step, last_mb, event_kind::optimizer, 0);
  }

  // The peak's bytes by category: each group's instance count there, times each member's bytes.
  if (have_peak) {
    const timeline_point& p = out.peak;
    const live_context at = context_of(p, peak_event, first_backward, L);
    std::array<std::uint64_t, 96> count_storage;
    std::vector<std::uint64_t> count_overflow;
    std::uint64_t* counts = count_storage.data();
    if (group_count > count_storage.size()) {
      count_overflow.resize(group_count);
      counts = count_overflow.data();
    }
    for (std::size_t g = 0; g < group_count; ++g) counts[g] = instances_of(*groups[g].like, at);
    u128 category[tensor_category_count] = {};
    index = 0;
    for (const tensor_spec& t : inv.tensors) {
      const std::size_t g = small ? member_storage[index] : member_overflow[index];
      ++index;
      category[static_cast<int>(t.category)] += static_cast<u128>(counts[g]) * t.bytes;
    }
    for (int c = 0; c < tensor_category_count; ++c) out.category_bytes_at_peak[c] = static_cast<std::uint64_t>(category[c]);
  }
  if (detail == timeline_detail::peak) return out;

  // What is live at the peak, buffer by buffer.
  const timeline_point& p = out.peak;
  const std::int64_t e = p.kind == event_kind::optimizer
                             ? inv.events_per_micro_batch
                             : event_index(p.kind, static_cast<std::int64_t>(p.layer), L);
  for (const tensor_spec& t : inv.tensors) {
    const std::uint64_t n = instances_at(t, p, first_backward, e, L);
    if (n) out.live_at_peak.push_back({&t, n, n * t.bytes});
  }
  return out;
}

}  // namespace trainplan
