// An inventory turned into the allocations and frees of a few training steps, in program order
// (allocator_trace.hpp: schedule_allocations), for the replay (replay_program.hpp) and the reference replay.
#include <algorithm>
#include <array>
#include <limits>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/allocator/backward_program_steps.hpp"
#include "planner/allocator/tensor_pieces.hpp"

namespace trainplan {
namespace {

struct instance {
  std::uint64_t begin, end;  // global times: allocated at begin, freed after end (end = max: never)
  std::uint32_t tensor, interval;
  std::uint64_t layer;
};

// An allocation or free of an instance, at a time (an event of the run) and a place within it (`sub`).
struct op {
  std::uint64_t time, sub;
  std::uint32_t kind;  // 0 allocate, 1 free
  std::uint64_t index;
  std::int32_t piece = -1;
};

bool op_before(const op& a, const op& b) {
  if (a.time != b.time) return a.time < b.time;
  if (a.sub != b.sub) return a.sub < b.sub;
  if (a.kind != b.kind) return a.kind < b.kind;
  return a.index < b.index;
}

// The operations in op_before's order (a total order: no two operations of a schedule share time, place, kind
// and instance). A counting sort by time (a few hundred to a few thousand events), then each event's
// operations, a few dozen, by one word packing (sub, kind, index): the same order as a comparison sort of the
// whole, several times faster (its four-field comparisons were a fifth of a search's time:
// docs/allocator-speed.md). A place or an instance too large to pack falls back to the comparison sort.
void sort_operations(std::vector<op>& ops) {
  std::uint64_t last_time = 0;
  bool packable = true;
  for (const op& o : ops) {
    last_time = std::max(last_time, o.time);
    packable = packable && o.sub < (1ull << 32) && o.index < (1ull << 31) && o.kind <= 1;
  }
  if (!packable || ops.size() >= (1ull << 32) || last_time > 4 * ops.size() + 1024) {
    std::sort(ops.begin(), ops.end(), op_before);
    return;
  }
  std::vector<std::size_t> first(last_time + 2, 0);  // by time: where its operations start
  for (const op& o : ops) ++first[o.time + 1];
  for (std::size_t t = 1; t < first.size(); ++t) first[t] += first[t - 1];
  struct keyed {
    std::uint64_t key;
    std::uint32_t at;  // the operation's place in `ops`
  };
  std::vector<keyed> order(ops.size());
  std::vector<std::size_t> next(first.begin(), first.end() - 1);
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const op& o = ops[k];
    order[next[o.time]++] = {o.sub << 32 | std::uint64_t{o.kind} << 31 | o.index, static_cast<std::uint32_t>(k)};
  }
  for (std::size_t t = 0; t + 1 < first.size(); ++t)
    if (first[t + 1] - first[t] > 1)
      std::sort(order.begin() + static_cast<std::ptrdiff_t>(first[t]), order.begin() + static_cast<std::ptrdiff_t>(first[t + 1]),
                [](const keyed& a, const keyed& b) { return a.key < b.key; });
  std::vector<op> sorted;
  sorted.reserve(ops.size());
  for (const keyed& k : order) sorted.push_back(ops[k.at]);
  ops = std::move(sorted);
}

// The sizes of each allocated buffer's tensors (split_by_parameters), those a backward program's steps resolve
// first, then every other buffer the schedule allocates, then AdamW's states interleaved by parameter.
void fill_allocation_sizes(allocator_schedule& schedule, const inventory& inv, const model_facts& facts) {
  for (const std::uint32_t t : schedule.allocated) {
    std::vector<std::uint64_t>& tensor_sizes = schedule.sizes[t];
    if (tensor_sizes.empty()) tensor_sizes = split_by_parameters(inv.tensors[t], facts, inv);
  }
  interleave_optimizer_states(schedule, inv);
}

}  // namespace

allocator_schedule resize_schedule(const allocator_schedule& like, const inventory& inv, const model_facts& facts,
                                   bool with_operations) {
  allocator_schedule schedule;
  schedule.inv = &inv;
  schedule.instances = like.instances;
  if (with_operations) schedule.ops = like.ops;
  schedule.allocated = like.allocated;
  schedule.workspace_ops = like.workspace_ops;
  schedule.step_ops = like.step_ops;
  schedule.micro_batches = like.micro_batches;
  schedule.micro_batch_ops = like.micro_batch_ops;
  schedule.sizes.assign(inv.tensors.size(), {});
  schedule.placed.assign(inv.tensors.size(), {});
  for (const backward_program& bp : inv.backward_programs) resolve_program(bp, inv, facts, schedule.sizes, schedule.placed);
  fill_allocation_sizes(schedule, inv, facts);
  return schedule;
}

std::uint64_t count_schedule_instances(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum, int steps) {
  // schedule_allocations' loops, counted: every layer copy of every interval (a copy whose interval is empty
  // is counted too: an upper bound). Saturates rather than wraps.
  const std::uint64_t mbs = std::min<std::uint64_t>(grad_accum, 3), s = static_cast<std::uint64_t>(std::max(steps, 0));
  std::uint64_t n = 0;
  auto add = [&n](std::uint64_t k) { n = k > ~0ull - n ? ~0ull : n + k; };
  for (const tensor_spec& t : inv.tensors) {
    if (!t.replayed) continue;
    const std::uint64_t copies = t.per_layer ? t.layer_end - t.layer_begin : 1;
    switch (t.lifetime) {
      case state_lifetime::whole_run:
      case state_lifetime::from_first_optimizer: add(1); break;
      case state_lifetime::optimizer_only:
      case state_lifetime::backward_to_optimizer: add(s); break;
      case state_lifetime::gradient_from_backward: add(s * copies); break;
      case state_lifetime::micro_batch:
      case state_lifetime::later_micro_batches: {
        const std::uint64_t batches = t.lifetime == state_lifetime::micro_batch ? mbs : mbs - 1;
        add(s * batches * static_cast<std::uint64_t>(t.interval_count) * copies);
        break;
      }
    }
  }
  // The incoming gradients of later micro-batches a backward program places (schedule_allocations): a piece of
  // every copy of the buffer it names, but the vocabulary table's.
  if (mbs > 1)
    for (const backward_program& bp : inv.backward_programs)
      for (std::size_t k = 0; k < bp.count; ++k) {
        const backward_step& st = bp.steps[k];
        if (st.part.empty() || !st.applies(bp.holds)) continue;
        const bool table = std::any_of(facts.tensors.begin(), facts.tensors.end(),
                                       [&](const param_tensor& p) { return p.name == st.part && p.vocabulary_table(); });
        if (table) continue;
        for (const tensor_spec& t : inv.tensors)
          if (t.name == st.tensor && t.replayed) add(s * (mbs - 1) * (t.per_layer ? t.layer_end - t.layer_begin : 1));
      }
  return n;
}

allocator_schedule schedule_allocations(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum,
                                        int steps) {
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
    if (!t.replayed) continue;  // the peak timeline's stand-in for momentary buffers the replay makes
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
        case state_lifetime::later_micro_batches:
          for (std::uint64_t mb = t.lifetime == state_lifetime::micro_batch ? 0 : 1; mb < mbs; ++mb)
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

  // Replay in time order, and within an event in program order (the inventory lists each layer's buffers in
  // the order its forward creates them: planner/profiles/hf/activations_hf_rows.hpp). `sub` orders the operations of one time.
  //   - Creation and the optimizer step: allocations in inventory order, then frees.
  //   - A forward event: allocations in inventory order; a working buffer (one that ends in the event it
  //     starts in) is freed as soon as the next buffer of the event that outlives it is allocated: a
  //     temporary dies when the op that consumes it returns (SDPA's math path frees the scores, softmax's
  //     output and the -inf mask once _safe_softmax's where() has written the probabilities:
  //     _scaled_dot_product_attention_math in aten/src/ATen/native/transformers/attention.cpp, _safe_softmax
  //     in aten/src/ATen/native/SoftMax.cpp), so the rest of the layer can take those blocks. A temporary
  //     with a free point of its own (tensor_spec::freed_after) is freed there instead: right after a named
  //     later buffer is allocated, or once the layer's output exists. A layer's input
  //     created by the previous layer's event is that event's output: allocated after the event's other
  //     buffers. Buffers that end in a forward event are freed at its end.
  //   - A backward event: first what a checkpointed layer recomputes (the buffers that start and end in the
  //     event and are not gradients), in forward order: torch.utils.checkpoint's non-reentrant unpack hook
  //     reruns the layer's forward when its backward first needs a saved tensor; then the layer's backward
  //     walks it in reverse inventory order, allocating its gradient buffers and releasing the recomputed
  //     ones as it reaches them (an autograd node drops its saved tensors once it has run); a recomputed
  //     temporary with a free point of its own is freed there, within the recomputation. Buffers kept from
  //     the forward are freed at the event's end, as the timeline counts them (every buffer whose lifetime
  //     covers the event is live at once), so the replay never holds less than the timeline; the gradient
  //     working buffers too.
  //   - A backward event written op by op (inventory::backward_programs): its steps in order. Those before the
  //     recomputation come first, then the recomputation as above, then the rest; what no step names is freed
  //     at the event's end.
  const std::uint64_t P = inv.tensors.size();
  const std::uint64_t event_end = 4 * P + 4;
  std::vector<std::vector<std::uint64_t>> sizes(inv.tensors.size());
  std::vector<std::vector<bool>> placed(inv.tensors.size());
  std::array<resolved_program, 3> programs;
  std::uint64_t longest_program = 0;
  for (std::size_t k = 0; k < programs.size(); ++k) {
    programs[k] = resolve_program(inv.backward_programs[k], inv, facts, sizes, placed);
    longest_program = std::max(longest_program, programs[k].count);
  }
  const std::uint64_t program_end = event_end + 4 * longest_program + 2;  // after every step of any program
  const std::int64_t head_event = event_index(event_kind::bwd_head, 0, L), embed_event = event_index(event_kind::bwd_embed, 0, L);
  // The program of the backward event at time t, if it has one.
  auto program_at = [&](std::uint64_t t) -> const resolved_program* {
    if (t == 0 || t == never) return nullptr;
    const std::uint64_t r = (t - 1) % per_step;
    if (r == mbs * E) return nullptr;  // the optimizer step
    const std::int64_t e = static_cast<std::int64_t>(r % E);
    for (std::size_t k = 0; k < programs.size(); ++k) {
      const backward_program& bp = inv.backward_programs[k];
      const bool here = bp.event == event_kind::bwd_head    ? e == head_event
                        : bp.event == event_kind::bwd_embed ? e == embed_event
                                                            : e > head_event && e < embed_event;
      if (bp.count > 0 && here) return &programs[k];
    }
    return nullptr;
  };
  // Where an op of a program event goes: a step's place, or the default rules' shifted past the steps before
  // the recomputation, with the event's end after every step.
  auto program_sub = [&](const resolved_program* p, std::uint64_t sub, std::int32_t step) -> std::uint64_t {
    if (!p) return sub;
    const std::uint64_t k = static_cast<std::uint64_t>(step), r = p->recompute_at;
    if (step >= 0) return k < r ? 2 * k : 2 * r + event_end + 2 * k;
    return sub >= event_end ? program_end : sub + 2 * r;
  };
  const std::uint64_t fwd0 = static_cast<std::uint64_t>(event_index(event_kind::fwd_layer, 0, L));
  const std::uint64_t last_forward = static_cast<std::uint64_t>(event_index(event_kind::loss, 0, L));
  auto forward_event = [&](std::uint64_t t, std::uint64_t& e) {  // false for the optimizer step and backward events
    const std::uint64_t r = (t - 1) % per_step;
    e = r % E;
    return r != mbs * E && e <= last_forward;
  };
  auto backward_event = [&](std::uint64_t t) {
    const std::uint64_t r = (t - 1) % per_step;
    return r != mbs * E && r % E > last_forward;
  };
  auto reverse_position = [&](std::uint64_t rank) { return 2 * P + 2 * (P - 1 - rank); };
  // The buffers that outlive the forward event they start in, by (time, rank): a working buffer waits for the
  // first of them after its own rank.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> outliving;
  for (const instance& in : instances)
    if (in.begin != 0 && in.end != in.begin) outliving.push_back({in.begin, in.tensor});
  std::sort(outliving.begin(), outliving.end());

  std::vector<op> ops;
  ops.reserve(instances.size() * 2);
  for (std::uint64_t n = 0; n < instances.size(); ++n) {
    const instance& in = instances[n];
    const tensor_spec& t = inv.tensors[in.tensor];
    const std::uint64_t rank = in.tensor;
    std::uint64_t alloc_sub = 2 * rank, free_sub = event_end, e = 0;
    const bool working = in.end == in.begin;
    std::uint64_t end_e = 0;
    // A free point names a later buffer (planner/profiles/hf/activations_hf.cpp resolves them in program order); one that
    // did not would free the buffer before it exists: the default rule then.
    // In a backward event only a checkpointed layer's recomputed temporaries have one: there "the layer's
    // output" is the end of the recomputation, before the backward's reverse walk.
    const bool in_forward = in.end != never && forward_event(in.end, end_e);
    const bool own_free_point = t.freed_after != tensor_spec::free_at_next_kept && t.freed_after > rank && in.end != never &&
                                (in_forward || (working && t.momentary && backward_event(in.end)));
    if (own_free_point)  // after the layer's output (2P+1; the last layer's, final_norm.in, before it), or after X
      free_sub = t.freed_after == tensor_spec::free_at_layer_output ? (in_forward ? 2 * P + 2 : 2 * P - 1)
                                                                    : 2 * static_cast<std::uint64_t>(t.freed_after) + 1;
    if (in.begin != 0 && forward_event(in.begin, e)) {
      if (t.per_layer && e + 1 >= fwd0 && e < fwd0 + in.layer) alloc_sub = 2 * P + 1;  // the next layer's input
      if (working && !own_free_point) {
        const auto next = std::lower_bound(outliving.begin(), outliving.end(), std::make_pair(in.begin, rank + 1));
        if (next != outliving.end() && next->first == in.begin) free_sub = 2 * next->second + 1;
      }
    } else if (in.begin != 0 && backward_event(in.begin)) {
      const bool gradient = t.category == tensor_category::activation_grads;
      alloc_sub = working && !gradient ? 2 * rank : reverse_position(rank);
      if (working && !gradient && !own_free_point) free_sub = reverse_position(rank) + 1;
    }
    if (const resolved_program* p = program_at(in.begin)) alloc_sub = program_sub(p, alloc_sub, p->alloc_at[in.tensor]);
    if (const resolved_program* p = program_at(in.end)) free_sub = program_sub(p, free_sub, p->free_at[in.tensor]);
    ops.push_back({in.begin, alloc_sub, 0, n});
    if (in.end != never) ops.push_back({in.end, free_sub, 1, n});
    // The parameters' pieces a program places: in its event of the instance's step and micro-batch (a layer's
    // program in that layer's backward).
    for (std::size_t k = 0; k < programs.size() && !placed[in.tensor].empty() && in.begin != 0; ++k)
      for (const resolved_program::piece_step& ps : programs[k].pieces) {
        if (ps.tensor != in.tensor) continue;
        const backward_program& bp = inv.backward_programs[k];
        const std::uint64_t start = in.begin - (in.begin - 1) % per_step % E;  // event 0 of the instance's micro-batch
        const std::int64_t e = bp.event == event_kind::bwd_layer ? event_index(event_kind::bwd_layer, static_cast<std::int64_t>(in.layer), L)
                               : bp.event == event_kind::bwd_head ? head_event
                                                                  : embed_event;
        ops.push_back({start + static_cast<std::uint64_t>(e), program_sub(&programs[k], 0, ps.step), 0, n, ps.piece});
      }
  }
  // In a step's micro-batches after the first, a gradient a program places one parameter at a time is added into
  // the .grad the first micro-batch made (AccumulateGrad: variable_grad += new_grad, torch/csrc/autograd/functions/
  // accumulate_grad.h): the incoming one is made where the program places the piece and dropped once added,
  // before the engine makes its next buffer. (The tied token table's later contributions are buffers of their
  // own in the inventory: grads.head.incoming, grads.embedding.incoming.)
  for (std::size_t k = 0; k < programs.size(); ++k)
    for (const resolved_program::piece_step& ps : programs[k].pieces) {
      if (ps.vocabulary_table) continue;
      const tensor_spec& t = inv.tensors[ps.tensor];
      const backward_program& bp = inv.backward_programs[k];
      const std::uint64_t first_copy = t.per_layer ? t.layer_begin : 0, end_copy = t.per_layer ? t.layer_end : 1;
      const std::uint64_t alloc_sub = program_sub(&programs[k], 0, ps.step);
      const std::uint64_t free_sub = ps.next_alloc >= 0 ? program_sub(&programs[k], 0, ps.next_alloc) - 1 : program_end - 1;
      for (int step = 0; step < steps; ++step)
        for (std::uint64_t mb = 1; mb < mbs; ++mb)
          for (std::uint64_t i = first_copy; i < end_copy; ++i) {
            const std::int64_t e = bp.event == event_kind::bwd_layer ? event_index(event_kind::bwd_layer, static_cast<std::int64_t>(i), L)
                                   : bp.event == event_kind::bwd_head ? head_event
                                                                      : embed_event;
            const std::uint64_t time = time_of(step, mb, static_cast<std::uint64_t>(e));
            const std::uint64_t n = instances.size();
            instances.push_back({time, time, ps.tensor, 0, i});
            ops.push_back({time, alloc_sub, 0, n, ps.piece});
            ops.push_back({time, free_sub, 1, n});
          }
    }
  sort_operations(ops);

  allocator_schedule schedule;
  schedule.inv = &inv;
  schedule.instances = instances.size();
  schedule.sizes = std::move(sizes);
  schedule.placed = std::move(placed);
  schedule.ops.reserve(ops.size());
  for (const op& o : ops) {
    const instance& in = instances[o.index];
    schedule.ops.push_back(
        {o.index, in.tensor, in.begin == 0 ? -1 : static_cast<int>((in.begin - 1) / per_step), o.kind == 1, o.piece});
  }
  std::vector<bool> seen(inv.tensors.size(), false);
  for (const allocator_schedule::op& o : schedule.ops)
    if (!o.free && !seen[o.tensor]) seen[o.tensor] = true, schedule.allocated.push_back(o.tensor);
  fill_allocation_sizes(schedule, inv, facts);
  // Where the cuBLAS workspaces are requested: before the first operation of step 1's first layer forward and
  // of its backward (the loss's gradient), or at the end when the schedule stops before them.
  const std::uint64_t workspace_times[2] = {time_of(0, 0, fwd0), time_of(0, 0, first_backward)};
  for (std::size_t w = 0; w < 2; ++w) {
    std::size_t i = 0;
    while (i < ops.size() && ops[i].time < workspace_times[w]) ++i;
    schedule.workspace_ops[w] = i;
  }
  // Where each step's operations begin (its first event's time), and the end.
  schedule.step_ops.assign(static_cast<std::size_t>(std::max(steps, 0)) + 1, ops.size());
  for (int step = 0; step < steps; ++step) {
    std::size_t i = 0;
    while (i < ops.size() && ops[i].time < time_of(step, 0, 0)) ++i;
    schedule.step_ops[static_cast<std::size_t>(step)] = i;
  }
  // Where each micro-batch, and each step's optimizer, begins (its first event's time; ops are in time order).
  schedule.micro_batches = mbs;
  schedule.micro_batch_ops.clear();
  for (std::size_t i = 0, step = 0; step < static_cast<std::size_t>(std::max(steps, 0)); ++step)
    for (std::uint64_t k = 0; k <= mbs; ++k) {
      const std::uint64_t begins = k < mbs ? time_of(static_cast<int>(step), k, 0) : optimizer_time(static_cast<int>(step));
      while (i < ops.size() && ops[i].time < begins) ++i;
      schedule.micro_batch_ops.push_back(i);
    }
  return schedule;
}

}  // namespace trainplan
