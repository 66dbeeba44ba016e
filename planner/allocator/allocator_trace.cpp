// The allocator replay (allocator_trace.hpp): an inventory turned into the allocations and frees of a few
// steps (model state split into PyTorch's per-parameter tensors, optimizer states made parameter by parameter,
// backward programs in program order), replayed through the default or the expandable-segments allocator.
#include "planner/allocator/allocator_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "planner/model/model_facts.hpp"
#include "planner/allocator/caching_allocator.hpp"
#include "planner/util/checked_math.hpp"
#include "planner/allocator/expandable_allocator.hpp"
#include "planner/run/lora.hpp"

namespace trainplan {
namespace {

// The parameter tensors a model-state buffer stands for (its scope), when its bytes are exactly theirs in its
// dtype; otherwise (sharded, quantized) it stays one allocation.
// A per-layer buffer stands for the tensors of the layers it covers (DeepSeek-V3's dense first layers hold
// other MLP tensors than its MoE layers).
// With `names`, each allocation's parameter tensor too (for the parameter scopes; left empty for the others).
std::vector<std::uint64_t> split_by_parameters(const tensor_spec& t, const model_facts& facts, const inventory& inv,
                                               std::vector<std::string_view>* names = nullptr) {
  const std::uint64_t width = dtype_bytes(t.type);
  if (t.allocations > 1 && t.scope == param_scope::none && t.bytes % t.allocations == 0)
    return std::vector<std::uint64_t>(t.allocations, t.bytes / t.allocations);  // peft's per-module copies
  std::vector<std::uint64_t> sizes;
  // One parameter's tensors: Llama's q, k and v (weights, and Qwen2's biases) are separate PyTorch tensors
  // where the planner's list holds them as one (model_facts::qkv_pieces).
  auto push = [&](const param_tensor& p) {
    const std::vector<std::uint64_t>* pieces = p.role == param_role::layer_qkv_weight ? &facts.qkv_pieces
                                               : p.role == param_role::layer_qkv_bias ? &facts.qkv_bias_pieces
                                                                                  : nullptr;
    if (pieces && !pieces->empty())
      for (std::uint64_t e : *pieces) sizes.push_back(e * width);
    else
      sizes.push_back(p.count * width);
    if (names) names->resize(sizes.size(), p.name);
  };
  auto take = [&](auto keep, std::uint64_t copies) {
    for (const param_tensor& p : facts.tensors)
      if (keep(p))
        for (std::uint64_t c = 0; c < copies; ++c) push(p);
  };
  auto in_range = [&](const param_tensor& p) { return facts.layers.holds(p, t.layer_begin, t.layer_end); };
  switch (t.scope) {
    case param_scope::none: break;
    case param_scope::all:
      // In PyTorch's order (model.parameters()): the tensors before the layers, then layer by layer, then
      // those after (the planner lists a layer's tensors once).
      for (std::size_t i = 0; i < facts.tensors.size();) {
        if (!facts.tensors[i].per_layer) {
          push(facts.tensors[i++]);
          continue;
        }
        std::size_t end = i;
        while (end < facts.tensors.size() && facts.tensors[end].per_layer) ++end;
        for (std::uint64_t layer = 0; layer < facts.layers.all; ++layer)
          for (std::size_t k = i; k < end; ++k)
            if (facts.layers.holds(facts.tensors[k], layer, layer + 1)) push(facts.tensors[k]);
        i = end;
      }
      break;
    case param_scope::layer: take([&](const param_tensor& p) { return p.per_layer && in_range(p); }, 1); break;
    case param_scope::layer_matmul: take([&](const param_tensor& p) { return p.per_layer && p.matmul && in_range(p); }, 1); break;
    case param_scope::layer_matmul_qkv:
    case param_scope::layer_matmul_after_qkv: {
      const bool qkv = t.scope == param_scope::layer_matmul_qkv;
      take([&](const param_tensor& p) { return p.per_layer && p.matmul && in_range(p) && (p.role == param_role::layer_qkv_weight) == qkv; }, 1);
      break;
    }
    case param_scope::head: {
      const bool tied = std::none_of(facts.tensors.begin(), facts.tensors.end(),
                                     [](const param_tensor& p) { return p.role == param_role::head; });
      take([tied](const param_tensor& p) {
        return p.role == param_role::final_norm || p.role == param_role::head || (tied && p.embedding());
      }, 1);
      break;
    }
    case param_scope::embedding: take([](const param_tensor& p) { return p.embedding(); }, 1); break;
    case param_scope::adapters:  // every layer's lora_A and lora_B of each adapted module, in model order
      for (std::uint64_t layer = 0; layer < inv.layers; ++layer)
        for (std::uint64_t elements : inv.adapter_layer_tensors) sizes.push_back(elements * width);
      break;
    case param_scope::layer_adapters:
      for (std::uint64_t elements : inv.adapter_layer_tensors) sizes.push_back(elements * width);
      break;
    case param_scope::layer_adapters_qkv_a:  // lora_A of each q, k, v module: tensors 0, 2, ... of the layer's list
    case param_scope::layer_adapters_rest:
      for (std::size_t i = 0; i < inv.adapter_layer_tensors.size(); ++i) {
        const bool qkv_a = lora_is_qkv_a(i, inv.adapter_qkv_modules);
        if (qkv_a == (t.scope == param_scope::layer_adapters_qkv_a)) sizes.push_back(inv.adapter_layer_tensors[i] * width);
      }
      break;
  }
  std::uint64_t sum = 0;
  for (std::uint64_t s : sizes) sum += s;
  const bool split = !sizes.empty() && sum == t.bytes;
  if (names && (!split || names->size() != sizes.size())) names->clear();  // one allocation, or no parameters
  return split ? sizes : std::vector<std::uint64_t>{t.bytes};
}

// torch.optim's _init_group creates one parameter's states together (AdamW: exp_avg, then exp_avg_sq) before
// the next parameter's, at the first optimizer step: GPT-2's recorded allocator history shows the pairs, in
// module order. The inventory lists each state as one buffer over every parameter; here the first state's
// instance makes all their per-parameter allocations, parameter by parameter, and the others make none (their
// lifetime is the same: from the first step on, never freed). States that are one allocation (sharded, or a
// non-PyTorch layout) are left as they are.
void interleave_optimizer_states(allocator_schedule& schedule, const inventory& inv) {
  std::vector<std::uint32_t> group;
  for (std::uint32_t i = 0; i < inv.tensors.size(); ++i) {
    const tensor_spec& t = inv.tensors[i];
    if (t.role == tensor_role::optimizer_state && t.lifetime == state_lifetime::from_first_optimizer &&
        schedule.sizes[i].size() > 1 && (group.empty() || schedule.sizes[i].size() == schedule.sizes[group[0]].size()))
      group.push_back(i);
  }
  if (group.size() < 2) return;
  const std::size_t n = schedule.sizes[group[0]].size();
  std::vector<std::uint64_t> together;
  together.reserve(n * group.size());
  for (std::size_t p = 0; p < n; ++p)
    for (std::uint32_t i : group) together.push_back(schedule.sizes[i][p]);
  schedule.sizes[group[0]] = std::move(together);
  for (std::size_t k = 1; k < group.size(); ++k) schedule.sizes[group[k]].assign(1, 0);  // a zero-byte request: none
}

// A backward event's steps (inventory::backward_programs) against this inventory: for each buffer the step that
// allocates it and the one that frees it (-1: none), and the steps that allocate one parameter's piece of a
// split gradient buffer. Step k's place in the event is position(k) (two apart, so that an operation can go just
// before a step: AccumulateGrad's incoming gradients, below).
struct resolved_program {
  std::uint64_t count = 0;         // 0: the event is not written op by op
  std::uint64_t recompute_at = 0;  // the steps before it come before the recomputation
  std::vector<std::int32_t> alloc_at, free_at;
  struct piece_step {
    std::uint32_t tensor;
    std::int32_t piece, step;
    // The step that allocates the next buffer after this one: in a micro-batch after the first, the piece is an
    // incoming gradient AccumulateGrad adds into the .grad and drops before the engine runs on (count: none).
    std::int32_t next_alloc;
    bool vocabulary_table;  // the tied token table's: its later contributions are buffers of their own
  };
  std::vector<piece_step> pieces;
};

// A step whose condition applies (backward_step::applies) must name a buffer the inventory holds, and a part one
// of the parameters that buffer stands for: a program that names what is not there is a mistake in the program,
// never something to skip.
resolved_program resolve_program(const backward_program& program, const inventory& inv, const model_facts& facts,
                                 std::vector<std::vector<std::uint64_t>>& sizes, std::vector<std::vector<bool>>& placed) {
  resolved_program r;
  if (program.count == 0) return r;
  r.count = program.count;
  r.recompute_at = program.count;
  r.alloc_at.assign(inv.tensors.size(), -1);
  r.free_at.assign(inv.tensors.size(), -1);
  const std::size_t first_piece = r.pieces.size();
  for (std::size_t k = 0; k < program.count; ++k) {
    const backward_step& st = program.steps[k];
    if (!st.applies(program.holds)) continue;
    const std::int32_t step = static_cast<std::int32_t>(k);
    if (st.kind == backward_step::recompute) {
      r.recompute_at = std::min<std::uint64_t>(r.recompute_at, k);
      continue;
    }
    bool found = false;
    for (std::uint32_t i = 0; i < inv.tensors.size(); ++i) {
      const tensor_spec& t = inv.tensors[i];
      if (t.name != st.tensor || !t.replayed) continue;
      if (st.kind == backward_step::free) {
        r.free_at[i] = step;
        found = true;
      } else if (st.part.empty()) {
        r.alloc_at[i] = step;
        found = true;
      } else {
        std::vector<std::string_view> names;
        std::vector<std::uint64_t> split = split_by_parameters(t, facts, inv, &names);
        const auto at = std::find(names.begin(), names.end(), st.part);
        if (at == names.end()) continue;
        found = true;
        if (sizes[i].empty()) sizes[i] = std::move(split);
        placed[i].resize(sizes[i].size());
        const std::int32_t piece = static_cast<std::int32_t>(at - names.begin());
        placed[i][static_cast<std::size_t>(piece)] = true;
        const bool table = std::any_of(facts.tensors.begin(), facts.tensors.end(), [&](const param_tensor& p) {
          return p.name == st.part && p.vocabulary_table();
        });
        r.pieces.push_back({i, piece, step, -1, table});
      }
    }
    if (!found)
      throw std::logic_error(fmt::format("backward program step {} ({} {}{}{}) names no buffer of the inventory", k,
                                         st.kind == backward_step::free ? "free" : "alloc", st.tensor,
                                         st.part.empty() ? "" : " part ", st.part));
  }
  for (std::size_t p = first_piece; p < r.pieces.size(); ++p) {
    resolved_program::piece_step& ps = r.pieces[p];
    for (std::size_t k = static_cast<std::size_t>(ps.step) + 1; k < program.count && ps.next_alloc < 0; ++k) {
      const backward_step& st = program.steps[k];
      if (st.applies(program.holds) && st.kind == backward_step::alloc) ps.next_alloc = static_cast<std::int32_t>(k);
    }
  }
  return r;
}

struct instance {
  std::uint64_t begin, end;  // global times: allocated at begin, freed after end (end = max: never)
  std::uint32_t tensor, interval;
  std::uint64_t layer;
};

}  // namespace

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
  struct op {
    std::uint64_t time, sub;
    std::uint32_t kind;  // 0 allocate, 1 free
    std::uint64_t index;
    std::int32_t piece = -1;
  };
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
  std::sort(ops.begin(), ops.end(), [](const op& a, const op& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.sub != b.sub) return a.sub < b.sub;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.index < b.index;
  });

  allocator_schedule schedule;
  schedule.inv = &inv;
  schedule.instances = instances.size();
  schedule.sizes = std::move(sizes);
  schedule.placed = std::move(placed);
  schedule.ops.reserve(ops.size());
  for (const op& o : ops) {
    const instance& in = instances[o.index];
    std::vector<std::uint64_t>& tensor_sizes = schedule.sizes[in.tensor];
    if (o.kind == 0 && tensor_sizes.empty()) tensor_sizes = split_by_parameters(inv.tensors[in.tensor], facts, inv);
    schedule.ops.push_back(
        {o.index, in.tensor, in.begin == 0 ? -1 : static_cast<int>((in.begin - 1) / per_step), o.kind == 1, o.piece});
  }
  interleave_optimizer_states(schedule, inv);
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
  return schedule;
}

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


allocator_replay replay_allocator(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum, int steps,
                                  std::vector<allocator_growth>* growth, std::uint64_t capacity_bytes) {
  return replay_schedule(schedule_allocations(inv, facts, grad_accum, steps), growth, capacity_bytes);
}

}  // namespace trainplan
