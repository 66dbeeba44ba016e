// The peak walk (timeline.hpp): the events of the first steps visited, buffers grouped by lifetime so that each
// event counts groups, not buffers, and the event where the most is live with what is live there.
#include "planner/memory/timeline.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

__extension__ typedef unsigned __int128 u128;  // sums of 64-bit sizes, checked once

// Number of integers i in the layers that hold `t` ([layer_begin, layer_end), or just 0 for a buffer that is
// not per layer) with first_base + first_step*i <= e <= last_base + last_step*i. Steps are -1, 0 or 1 (a
// layer's forward events rise with i, its backward events fall), so each bound clamps lo or hi. (Branches:
// a version with selects ran 5% slower in plan bench --planner, the signs repeat from group to group.)
std::uint64_t count_in_interval(const event_interval& iv, std::int64_t e, const tensor_spec& t) {
  std::int64_t lo = 0, hi = 0;
  if (t.per_layer) lo = t.layer_begin, hi = static_cast<std::int64_t>(t.layer_end) - 1;
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

// Room for n values: on the stack up to N (the usual inventory), on the heap beyond.
template <typename T, std::size_t N>
class scratch {
 public:
  T* get(std::size_t n) {
    if (n <= N) return inline_.data();
    heap_.resize(n);
    return heap_.data();
  }

 private:
  std::array<T, N> inline_;
  std::vector<T> heap_;
};

// Buffers whose lifetime fields are equal are live at the same events.
inline bool same_lifetime(const tensor_spec& a, const tensor_spec& b) {
  auto same = [](const event_interval& x, const event_interval& y) {
    return x.first_base == y.first_base && x.first_step == y.first_step && x.last_base == y.last_base &&
           x.last_step == y.last_step;
  };
  return a.lifetime == b.lifetime && a.per_layer == b.per_layer && a.layer_begin == b.layer_begin &&
         a.layer_end == b.layer_end && a.interval_count == b.interval_count &&
         same(a.intervals[0], b.intervals[0]) && (a.interval_count < 2 || same(a.intervals[1], b.intervals[1]));
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
         (static_cast<std::uint64_t>(t.layer_begin) << 32 | t.layer_end) * 0x2545f4914f6cdd1dull +
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
    case state_lifetime::later_micro_batches:
      if (!at.later_micro_batch) return 0;
      [[fallthrough]];
    case state_lifetime::micro_batch: {
      if (at.optimizer) return 0;
      std::uint64_t n = 0;
      for (int i = 0; i < k.interval_count; ++i) n += count_in_interval(k.intervals[i], at.e, k);
      return n;
    }
    case state_lifetime::gradient_from_backward: {
      if (at.optimizer || at.later_micro_batch) return k.instances();
      const event_interval from_then_on{k.intervals[0].first_base, k.intervals[0].first_step,
                                        std::numeric_limits<std::int64_t>::max() / 4, 0};
      return count_in_interval(from_then_on, at.e, k);
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

std::uint64_t instances_live(const tensor_spec& t, std::int64_t event) {
  std::uint64_t n = 0;
  for (int k = 0; k < t.interval_count; ++k) n += count_in_interval(t.intervals[k], event, t);
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

  // Buffers with the same lifetime are live together: visit each such group once (a PyTorch eager layer's two
  // dozen saved tensors are one group). The peak is found on each group's total bytes; the bytes by category are
  // summed once, at the peak (integer sums: the same in any order).
  struct lifetime_group {
    const tensor_spec* like;  // the group's first buffer
    u128 bytes;               // every category
  };
  // On the stack for the usual inventory (under 96 buffers): a sweep walks millions of them.
  const std::size_t n = inv.tensors.size();
  scratch<lifetime_group, 96> group_store;
  scratch<std::uint64_t, 96> hash_store;      // each group's lifetime_hash
  scratch<std::uint32_t, 96> member_store;    // the group each buffer joined, for the breakdown at the peak
  lifetime_group* groups = group_store.get(n);
  std::uint64_t* hashes = hash_store.get(n);
  std::uint32_t* members = member_store.get(n);
  std::size_t group_count = 0;
  // Open addressing on the hash, at most half full: a buffer finds its group in about one probe.
  const std::size_t slots = std::bit_ceil(std::max<std::size_t>(2 * n, 64));
  scratch<std::uint32_t, 256> slot_store;  // group index + 1; 0: empty
  std::uint32_t* slot = slot_store.get(slots);
  std::fill_n(slot, slots, 0u);
  u128 run_bytes = 0;  // the current run of buffers with one lifetime
  for (std::size_t i = 0; i < n; ++i) {
    const tensor_spec& t = inv.tensors[i];
    // Builders add runs of buffers with one lifetime (a layer's saved tensors): such a buffer joins its
    // predecessor's group without hashing, and a run's bytes are summed in a register and added to its
    // group once, when the run ends (not through memory, buffer by buffer).
    const std::uint64_t counted = t.momentary ? 0 : t.bytes;  // planner/memory/inventory.hpp: tensor_spec::momentary
    if (i > 0 && same_lifetime(inv.tensors[i - 1], t)) {
      run_bytes += counted;
      members[i] = members[i - 1];
      continue;
    }
    if (i > 0) groups[members[i - 1]].bytes += run_bytes;
    run_bytes = counted;
    const std::uint64_t hash = lifetime_hash(t);
    std::size_t at = static_cast<std::size_t>(hash >> (64 - std::countr_zero(slots)));  // the best-mixed bits
    while (slot[at] != 0 && !(hashes[slot[at] - 1] == hash && same_lifetime(*groups[slot[at] - 1].like, t)))
      at = (at + 1) & (slots - 1);
    if (slot[at] == 0) {
      hashes[group_count] = hash;
      groups[group_count++] = {&t, 0};
      slot[at] = static_cast<std::uint32_t>(group_count);
    }
    members[i] = slot[at] - 1;
  }
  if (n > 0) groups[members[n - 1]].bytes += run_bytes;
  // DeepSeek's dense first layers hold other buffers than its MoE layers: the live bytes are piecewise linear
  // in the layers, and the peak search visits the ends of both pieces.
  const std::int64_t boundary = static_cast<std::int64_t>(inv.dense_layers);
  const bool two_kinds = boundary > 0 && boundary < L;
  // Activations (micro_batch lifetime) are live by their event intervals alone, and none is live during the
  // optimizer step: their bytes at an event are summed once, however many steps and micro-batches visit it.
  // Gradients that appear layer by layer depend on the event, the step and the micro-batch. Every other
  // group is live or not as a whole by the step, micro-batch and phase alone: those are summed per lifetime
  // once, and a visit adds at most four totals. (Copies of the groups, each list contiguous: a visit reads
  // them in order.)
  // Buffers of later micro-batches only (AccumulateGrad's incoming gradients) join the gradients' list: few
  // groups, each counted by instances_of at a visit.
  scratch<lifetime_group, 96> activation_store, gradient_store;
  lifetime_group* activation_groups = activation_store.get(group_count);
  lifetime_group* gradient_groups = gradient_store.get(group_count);
  std::size_t activation_count = 0, gradient_count = 0;
  bool later_only = false;  // a buffer that exists only in a step's later micro-batches
  u128 whole_run_bytes = 0, backward_to_optimizer_bytes = 0, from_first_optimizer_bytes = 0, optimizer_only_bytes = 0;
  // Which events the peak search must visit, from the groups (a group's bytes are positive when any
  // member's are). A buffer that appears only in the embedding's backward (the harness's fp32 embedding
  // gradient) makes that event more than a subset of the last backward layer's: then it is visited too.
  bool optimizer_state = false, grads_per_layer = false, embed_backward_scratch = false;
  const std::int64_t bwd_embed = event_index(event_kind::bwd_embed, 0, L);
  for (std::size_t g = 0; g < group_count; ++g) {
    const tensor_spec& t = *groups[g].like;
    const u128 bytes = groups[g].bytes;
    switch (t.lifetime) {
      case state_lifetime::micro_batch:
        activation_groups[activation_count++] = groups[g];
        if (!t.per_layer && bytes > 0)
          for (int k = 0; k < t.interval_count; ++k) embed_backward_scratch |= t.intervals[k].first_base == bwd_embed;
        break;
      case state_lifetime::gradient_from_backward:
        gradient_groups[gradient_count++] = groups[g];
        grads_per_layer = true;
        break;
      case state_lifetime::later_micro_batches:
        gradient_groups[gradient_count++] = groups[g];
        later_only |= bytes > 0;
        for (int k = 0; k < t.interval_count; ++k) embed_backward_scratch |= bytes > 0 && t.intervals[k].first_base == bwd_embed;
        break;
      case state_lifetime::whole_run: whole_run_bytes += bytes; break;
      case state_lifetime::backward_to_optimizer: backward_to_optimizer_bytes += bytes; break;
      case state_lifetime::from_first_optimizer:
        from_first_optimizer_bytes += bytes;
        optimizer_state |= bytes > 0;
        break;
      case state_lifetime::optimizer_only: optimizer_only_bytes += bytes; break;
    }
  }
  struct event_bytes {
    std::int64_t e;
    u128 bytes;
  };
  std::array<event_bytes, 12> activation_cache;  // the peak search visits 8 distinct events (11 with dense first layers)
  std::size_t cached = 0;
  auto activation_bytes_at = [&](std::int64_t e) {
    for (std::size_t i = 0; i < cached; ++i)
      if (activation_cache[i].e == e) return activation_cache[i].bytes;
    u128 sum = 0;
    for (std::size_t a = 0; a < activation_count; ++a) {
      const tensor_spec& t = *activation_groups[a].like;
      std::uint64_t instances = 0;
      for (int k = 0; k < t.interval_count; ++k) instances += count_in_interval(t.intervals[k], e, t);
      sum += static_cast<u128>(instances) * activation_groups[a].bytes;
    }
    if (cached < activation_cache.size()) activation_cache[cached++] = {e, sum};
    return sum;
  };

  std::int64_t peak_event = 0;
  // The point's fields come as scalars and are stored one by one: a timeline_point assembled by the caller
  // and copied whole costs more than the visit (wide reads of narrow stores just made).
  auto visit = [&](int step, std::uint64_t mb, event_kind kind, std::uint64_t layer, std::int64_t e) {
    const live_context at{kind == event_kind::optimizer, mb > 0, step > 1, e, first_backward, L};
    // Summed in 128 bits and checked once (sizes are each below 2^64; < 2^64 x 2^70: no overflow).
    // The same rules as instances_of, on each lifetime's total.
    u128 live = (at.optimizer ? optimizer_only_bytes : activation_bytes_at(e)) + whole_run_bytes;
    if (at.optimizer || at.later_micro_batch || at.e >= at.first_backward) live += backward_to_optimizer_bytes;
    if (at.later_step || at.optimizer) live += from_first_optimizer_bytes;
    for (std::size_t g = 0; g < gradient_count; ++g)
      live += static_cast<u128>(instances_of(*gradient_groups[g].like, at)) * gradient_groups[g].bytes;
    if (live > std::numeric_limits<std::uint64_t>::max()) throw input_error("live bytes are larger than 64 bits can hold");
    const std::uint64_t live_bytes = static_cast<std::uint64_t>(live);
    if (keep_points) out.points.push_back({step, mb, kind, layer, live_bytes});
    if (!have_peak || live_bytes > out.peak.live_bytes) {
      out.peak.step = step;
      out.peak.micro_batch = mb;
      out.peak.kind = kind;
      out.peak.layer = layer;
      out.peak.live_bytes = live_bytes;
      peak_event = e;
      have_peak = true;
    }
  };
  auto visit_event = [&](int step, std::uint64_t mb, event_kind kind, std::int64_t layer) {
    visit(step, mb, kind, static_cast<std::uint64_t>(layer),
          kind == event_kind::optimizer ? inv.events_per_micro_batch : event_index(kind, layer, L));
  };

  const std::uint64_t micro_batches = grad_accum > 1 ? 2 : 1;
  if (keep_points) {
    for (int step = 1; step <= 2; ++step) {
      for (std::uint64_t mb = 0; mb < micro_batches; ++mb)
        for (std::int64_t e = 0; e < inv.events_per_micro_batch; ++e) {
          event_id id = event_at(e, L);
          visit(step, mb, id.kind, id.layer, e);
        }
      visit(step, micro_batches - 1, event_kind::optimizer, 0, inv.events_per_micro_batch);
    }
  } else {
    const int step = optimizer_state ? 2 : 1;
    const std::uint64_t last_mb = micro_batches - 1;
    // The embedding's forward holds a strict subset of what the last layer's forward holds (its buffers
    // live on through the layers), and its backward a strict subset of the last layer's backward unless a
    // buffer starts there; step 2's optimizer step holds what step 1's does. None of them can be the
    // first peak.
    if (optimizer_state) visit_event(1, last_mb, event_kind::optimizer, 0);
    auto forward = [&] {
      if (two_kinds) visit_event(step, last_mb, event_kind::fwd_layer, boundary - 1);
      visit_event(step, last_mb, event_kind::fwd_layer, L - 1);
      visit_event(step, last_mb, event_kind::fwd_head, 0);
      visit_event(step, last_mb, event_kind::loss, 0);
    };
    auto backward = [&](std::uint64_t mb) {
      visit_event(step, mb, event_kind::bwd_head, 0);
      visit_event(step, mb, event_kind::bwd_layer, L - 1);
      if (two_kinds) {
        visit_event(step, mb, event_kind::bwd_layer, boundary);
        visit_event(step, mb, event_kind::bwd_layer, boundary - 1);
      }
      if (grads_per_layer) {
        // Gradients that appear layer by layer make the backward's live bytes linear in the layers done
        // (each layer frees what it saved and adds its gradients), so the largest is at either end.
        visit_event(step, mb, event_kind::bwd_layer, 0);
      }
      if (grads_per_layer || embed_backward_scratch) visit_event(step, mb, event_kind::bwd_embed, 0);
    };
    if (micro_batches == 1) {
      forward(), backward(0);
    } else {
      backward(0), forward();  // micro-batch 1's backward comes first in time, then micro-batch 2's forward
      // With gradients appearing layer by layer, a later micro-batch's backward holds more than the first's
      // (every gradient exists already, and AccumulateGrad's incoming ones come on top), so it is visited
      // too, after its forward.
      if (grads_per_layer || later_only) backward(last_mb);
    }
    if (!optimizer_state) visit_event(step, last_mb, event_kind::optimizer, 0);
  }

  // The peak's bytes by category: each group's instance count there, times each member's bytes.
  if (have_peak) {
    const timeline_point& p = out.peak;
    const live_context at = context_of(p, peak_event, first_backward, L);
    scratch<std::uint64_t, 96> count_store;
    std::uint64_t* counts = count_store.get(group_count);
    for (std::size_t g = 0; g < group_count; ++g) counts[g] = instances_of(*groups[g].like, at);
    // Runs of one category are summed in a register, then added to the category (as the groups above).
    u128 category[tensor_category_count] = {};
    u128 run = 0;
    tensor_category run_category = n > 0 ? inv.tensors[0].category : tensor_category::weights;
    for (std::size_t i = 0; i < n; ++i) {
      const tensor_spec& t = inv.tensors[i];
      if (t.category != run_category) {
        category[static_cast<int>(run_category)] += run;
        run = 0;
        run_category = t.category;
      }
      if (!t.momentary) run += static_cast<u128>(counts[members[i]]) * t.bytes;
    }
    category[static_cast<int>(run_category)] += run;
    for (int c = 0; c < tensor_category_count; ++c) out.category_bytes_at_peak[c] = static_cast<std::uint64_t>(category[c]);
  }
  if (detail == timeline_detail::peak) return out;

  // What is live at the peak, buffer by buffer.
  const timeline_point& p = out.peak;
  const std::int64_t e = p.kind == event_kind::optimizer
                             ? inv.events_per_micro_batch
                             : event_index(p.kind, static_cast<std::int64_t>(p.layer), L);
  for (const tensor_spec& t : inv.tensors) {
    const std::uint64_t n = t.momentary ? 0 : instances_at(t, p, first_backward, e, L);
    if (n) out.live_at_peak.push_back({&t, n, n * t.bytes});
  }
  return out;
}

}  // namespace trainplan
