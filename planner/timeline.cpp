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

bool state_live(state_lifetime life, const timeline_point& p, std::int64_t first_backward_event,
                std::int64_t event) {
  switch (life) {
    case state_lifetime::whole_run: return true;
    case state_lifetime::backward_to_optimizer:
      return p.kind == event_kind::optimizer || p.micro_batch > 0 || event >= first_backward_event;
    case state_lifetime::from_first_optimizer: return p.step > 1 || p.kind == event_kind::optimizer;
    case state_lifetime::optimizer_only: return p.kind == event_kind::optimizer;
    case state_lifetime::micro_batch:
    case state_lifetime::gradient_from_backward: return false;  // counted per instance by instances_at
  }
  return false;
}

// Instances of `t` live at point `p` (micro-batch event `e`).
std::uint64_t instances_at(const tensor_spec& t, const timeline_point& p, std::int64_t first_backward, std::int64_t e,
                           std::int64_t L) {
  switch (t.lifetime) {
    case state_lifetime::micro_batch: return p.kind == event_kind::optimizer ? 0 : instances_live(t, e, L);
    case state_lifetime::gradient_from_backward: {
      const std::uint64_t all = t.per_layer ? static_cast<std::uint64_t>(L) : 1;
      if (p.kind == event_kind::optimizer || p.micro_batch > 0) return all;
      const event_interval from_then_on{t.intervals[0].first_base, t.intervals[0].first_step,
                                        std::numeric_limits<std::int64_t>::max() / 4, 0};
      return count_in_interval(from_then_on, e, L, t.per_layer);
    }
    default: return state_live(t.lifetime, p, first_backward, e) ? 1 : 0;
  }
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

  // Live bytes of one event, by category; summed in 128 bits and checked once (sizes are each below 2^64).
  u128 best_category[tensor_category_count] = {};
  // Buffers with the same lifetime and category are live together: visit each such group once (an hf
  // layer's two dozen saved tensors are one group).
  struct lifetime_group {
    const tensor_spec* like;
    u128 bytes;
  };
  // On the stack for the usual inventory (under 96 buffers): a sweep walks millions of them.
  std::array<lifetime_group, 96> group_storage;
  std::vector<lifetime_group> group_overflow;
  lifetime_group* groups_begin = group_storage.data();
  std::size_t group_count = 0;
  if (inv.tensors.size() > group_storage.size()) {
    group_overflow.resize(inv.tensors.size());
    groups_begin = group_overflow.data();
  }
  struct group_span {
    lifetime_group* b;
    std::size_t* n;
    lifetime_group* begin() const { return b; }
    lifetime_group* end() const { return b + *n; }
    bool empty() const { return *n == 0; }
    lifetime_group& back() const { return b[*n - 1]; }
    void push_back(const lifetime_group& g) const { b[(*n)++] = g; }
  } groups{groups_begin, &group_count};
  for (const tensor_spec& t : inv.tensors) {
    auto same = [&t](const lifetime_group& g) {
      const tensor_spec& u = *g.like;
      auto same_interval = [](const event_interval& x, const event_interval& y) {
        return x.first_base == y.first_base && x.first_step == y.first_step && x.last_base == y.last_base &&
               x.last_step == y.last_step;
      };
      return u.category == t.category && u.lifetime == t.lifetime && u.per_layer == t.per_layer &&
             u.interval_count == t.interval_count && same_interval(u.intervals[0], t.intervals[0]) &&
             same_interval(u.intervals[1], t.intervals[1]);
    };
    // Buffers of one lifetime are mostly added one after another: try the last group first.
    auto it = !groups.empty() && same(groups.back()) ? groups.end() - 1 : std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end()) groups.push_back({&t, t.bytes});
    else it->bytes += t.bytes;
  }

  auto visit = [&](timeline_point p, std::int64_t e) {
    u128 category[tensor_category_count] = {};
    for (const lifetime_group& g : groups) {
      const std::uint64_t n = instances_at(*g.like, p, first_backward, e, L);
      category[static_cast<int>(g.like->category)] += static_cast<u128>(n) * g.bytes;  // < 2^64 x 2^70: no overflow
    }
    u128 live = 0;
    for (u128 c : category) live += c;
    if (live > std::numeric_limits<std::uint64_t>::max()) throw input_error("live bytes are larger than 64 bits can hold");
    p.live_bytes = static_cast<std::uint64_t>(live);
    if (keep_points) out.points.push_back(p);
    if (!have_peak || p.live_bytes > out.peak.live_bytes) {
      out.peak = p;
      have_peak = true;
      std::copy(std::begin(category), std::end(category), std::begin(best_category));
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

  for (int c = 0; c < tensor_category_count; ++c) out.category_bytes_at_peak[c] = static_cast<std::uint64_t>(best_category[c]);
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
