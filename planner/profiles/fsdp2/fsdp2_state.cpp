// FSDP2's per-rank model state and per-unit buffers (fsdp2_state.hpp). What each buffer is and when FSDP2 holds
// it is read from torch/distributed/fsdp/_fully_shard/: _fsdp_param.py (FSDPParam: the padded shard, the
// all-gather outputs and the unsharded parameter), _fsdp_collectives.py (foreach_all_gather, which allocates the
// flat output, and foreach_reduce, which allocates the reduce-scatter input and views the sharded gradients
// into its output) and _fsdp_param_group.py (the hooks: unshard in pre-forward and pre-backward, reshard in
// post-forward, prefetching the next unit in backward, holding the reduce-scatter input until the next unit's
// post-backward).
#include "planner/profiles/fsdp2/fsdp2_state.hpp"

#include <algorithm>

#include "planner/memory/inventory_builder.hpp"
#include "planner/run/optimizer.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {

std::uint64_t fsdp2_unit::padded_elements() const { return checked_mul(shard_elements, ranks, "FSDP unit"); }

fsdp2_units fsdp2_unit_sizes(const model_facts& facts, std::uint64_t ranks) {
  fsdp2_units u;
  u.layer.ranks = u.embedding.ranks = u.head.ranks = ranks;
  const bool tied = std::none_of(facts.tensors.begin(), facts.tensors.end(),
                                 [](const param_tensor& p) { return p.role == param_role::head; });
  // A layer's tensors by the layers they sit in: every layer's, DeepSeek's dense first layers' own, its MoE
  // layers' own. A unit is one layer: the largest kind is what a rank must gather at once.
  fsdp2_unit per_layer[3];  // layer_set::all, dense, moe
  for (fsdp2_unit& unit : per_layer) unit.ranks = ranks;
  for (const param_tensor& p : facts.tensors) {
    const std::uint64_t d0 = p.shape.empty() ? p.count : p.shape[0];
    const std::uint64_t row = d0 == 0 ? 0 : p.count / d0;
    // Llama's q, k and v are separate PyTorch tensors where the planner lists them as one (model_facts::qkv_pieces):
    // each is chunked on its own.
    const std::vector<std::uint64_t>* pieces = p.role == param_role::layer_qkv_weight ? &facts.qkv_pieces
                                               : p.role == param_role::layer_qkv_bias ? &facts.qkv_bias_pieces
                                                                                  : nullptr;
    std::uint64_t shard = 0;
    if (pieces && !pieces->empty() && row > 0) {
      for (std::uint64_t piece : *pieces)
        shard = checked_add(shard, checked_mul((piece / row + ranks - 1) / ranks, row, "FSDP shard"), "FSDP shard");
    } else {
      shard = checked_mul((d0 + ranks - 1) / ranks, row, "FSDP shard");
    }
    fsdp2_unit& unit = p.per_layer ? per_layer[static_cast<int>(p.in_layers)]
                       : p.embedding() && !tied ? u.embedding
                                                : u.head;  // the final norm, the head (and a tied embedding)
    unit.elements = checked_add(unit.elements, p.count, "FSDP unit");
    unit.shard_elements = checked_add(unit.shard_elements, shard, "FSDP shard");
    u.shard_elements_total =
        checked_add(u.shard_elements_total, checked_mul(shard, facts.layers.instances(p), "FSDP shard"), "FSDP shard");
  }
  u.layer = per_layer[0];
  const fsdp2_unit& own = per_layer[2].elements >= per_layer[1].elements ? per_layer[2] : per_layer[1];
  u.layer.elements = checked_add(u.layer.elements, own.elements, "FSDP unit");
  u.layer.shard_elements = checked_add(u.layer.shard_elements, own.shard_elements, "FSDP shard");
  return u;
}

void add_fsdp2_state(inventory& out, const model_spec& m, const run_config& run, const precision_layout& layout,
                     const model_facts& facts) {
  const std::uint64_t N = run.data_parallel();
  const fsdp2_units u = fsdp2_unit_sizes(facts, N);
  const std::int64_t L = static_cast<std::int64_t>(m.layers);
  inventory_builder inv(L, out.tensors);
  // The parameters' original dtype (the sharded DTensors the optimizer updates: fp32), MixedPrecisionPolicy's
  // param_dtype (what the all-gather moves and the forward computes with) and its reduce dtype (what the
  // reduce-scatter moves; fp32 in torchtitan, the gradients' dtype in Accelerate's bf16 policy).
  const dtype orig = layout.master.value_or(layout.weights), param = layout.weights;
  const dtype reduce = layout.optimizer_grad_dtype();

  // ---- the whole run: the shard, and the optimizer's state over it ---------------------------------------
  inv.model_state("fsdp.params.sharded", u.shard_elements_total, orig, tensor_category::master_weights,
                  state_lifetime::whole_run, tensor_role::master_weights);
  // The optimizer's states are zeros_like the DTensor parameters: their local shape, unpadded (about 1/N).
  for (const optimizer_state_buffer& st : optimizer_state(run.optimizer, facts.tensors, facts.layers, layout.optimizer_state)) {
    const std::uint64_t bytes = (st.bytes + N - 1) / N;
    tensor_spec& t = inv.add(st.name, {bytes / dtype_bytes(st.type)}, st.type, tensor_category::optimizer);
    t.bytes = bytes;
    t.lifetime = state_lifetime::from_first_optimizer;
    t.role = tensor_role::optimizer_state;
  }

  // ---- the sharded gradients: each unit's reduce-scatter output, from its backward to the optimizer step --
  // (views into the output, in the original dtype: a cast copy when the reduce dtype differs.)
  const std::int64_t bwd0 = inv.bwd_layer0(), fwd0 = inv.fwd_layer0();
  tensor_spec& layer_grads = inv.model_state("layer{}.fsdp.grads.sharded", u.layer.shard_elements, orig,
                                             tensor_category::gradients, state_lifetime::gradient_from_backward,
                                             tensor_role::gradients);
  inv.per_layer(layer_grads);
  layer_grads.intervals[0] = {bwd0, -1, 0, 0};
  auto unit_grads = [&](std::string_view name, const fsdp2_unit& unit, event_kind from) {
    if (unit.elements == 0) return;
    tensor_spec& t = inv.model_state(name, unit.shard_elements, orig, tensor_category::gradients,
                                     state_lifetime::gradient_from_backward, tensor_role::gradients);
    t.intervals[0] = {inv.event(from), 0, 0, 0};
  };
  unit_grads("fsdp.head.grads.sharded", u.head, event_kind::bwd_head);
  unit_grads("fsdp.embedding.grads.sharded", u.embedding, event_kind::bwd_embed);

  // ---- a decoder layer's unit, in each micro-batch ------------------------------------------------------------
  // Forward: pre-forward all-gathers into one flat buffer (param_dtype, the padded unit), copy-out makes the
  // unsharded parameters (a tensor per parameter, as large again), post-forward frees them
  // (reshard_after_forward), and the next unit's wait frees the flat buffer: two copies of the unit while it
  // runs. Backward: the unit is all-gathered again, prefetched while the unit after it in forward order runs
  // its backward (one unit ahead: _backward_prefetch), copied out when its own backward starts; autograd writes
  // its unsharded gradients (param_dtype); post-backward copies them into the reduce-scatter input (reduce
  // dtype), which is held until the next unit's post-backward has made the default stream wait for the
  // reduce-scatter. Each buffer is counted in the events it is live through; the moments two of them overlap at
  // an event's edge (a flat buffer freed just after the next is made) are left to the allocator replay's order.
  const std::uint64_t layer_padded = u.layer.padded_elements();
  auto layer_buffer = [&](std::string_view name, std::uint64_t elements, dtype type, tensor_category cat,
                          std::initializer_list<event_interval> intervals) {
    tensor_spec& t = inv.layer_intervals(name, {elements}, type, cat, intervals);
    t.role = tensor_role::communication;
  };
  const event_interval fwd_of_layer{fwd0, 1, fwd0, 1}, bwd_of_layer{bwd0, -1, bwd0, -1};
  const event_interval bwd_of_next{bwd0 - 1, -1, bwd0 - 1, -1};      // layer j+1's backward (the head's, for the last)
  const event_interval bwd_of_previous{bwd0 + 1, -1, bwd0 + 1, -1};  // layer j-1's backward (the embedding's, for layer 0)
  layer_buffer("layer{}.fsdp.all_gather_output", layer_padded, param, tensor_category::weights, {fwd_of_layer, bwd_of_next});
  layer_buffer("layer{}.fsdp.unsharded_params", layer_padded, param, tensor_category::weights, {fwd_of_layer, bwd_of_layer});
  layer_buffer("layer{}.fsdp.unsharded_grads", u.layer.elements, param, tensor_category::gradients, {bwd_of_layer});
  layer_buffer("layer{}.fsdp.reduce_scatter_input", layer_padded, reduce, tensor_category::gradients, {bwd_of_previous});

  // ---- the head's unit: gathered in its forward, not resharded until its backward ends ---------------------
  // A buffer of the head's or the embedding's unit, live from one event to another (a layer's: that layer's).
  auto span = [&](std::string_view name, std::uint64_t elements, dtype type, tensor_category cat, event_kind first,
                  event_kind last, std::int64_t layer = 0) {
    tensor_spec& t = inv.add(name, {elements}, type, cat);
    t.interval_count = 1;
    t.intervals[0] = {event_index(first, layer, L), 0, event_index(last, layer, L), 0};
    t.role = tensor_role::communication;
  };
  if (u.head.elements > 0) {
    const std::uint64_t padded = u.head.padded_elements();
    span("fsdp.head.all_gather_output", padded, param, tensor_category::weights, event_kind::fwd_head, event_kind::fwd_head);
    span("fsdp.head.unsharded_params", padded, param, tensor_category::weights, event_kind::fwd_head, event_kind::bwd_head);
    span("fsdp.head.unsharded_grads", u.head.elements, param, tensor_category::gradients, event_kind::bwd_head, event_kind::bwd_head);
    // Held until the last layer's post-backward.
    span("fsdp.head.reduce_scatter_input", padded, reduce, tensor_category::gradients, event_kind::bwd_layer,
         event_kind::bwd_layer, L - 1);
  }
  // ---- the embedding's unit: the first all-gather of the forward and the last reduce-scatter of the backward --
  if (u.embedding.elements > 0) {
    const std::uint64_t padded = u.embedding.padded_elements();
    span("fsdp.embedding.all_gather_output", padded, param, tensor_category::weights, event_kind::fwd_embed, event_kind::fwd_embed);
    span("fsdp.embedding.unsharded_params", padded, param, tensor_category::weights, event_kind::fwd_embed, event_kind::fwd_embed);
    // In backward it is prefetched while layer 0's backward runs, and freed with the step's last reduce-scatter.
    span("fsdp.embedding.all_gather_output.backward", padded, param, tensor_category::weights, event_kind::bwd_layer,
         event_kind::bwd_layer, 0);
    span("fsdp.embedding.unsharded_params.backward", padded, param, tensor_category::weights, event_kind::bwd_embed,
         event_kind::bwd_embed);
    span("fsdp.embedding.unsharded_grads", u.embedding.elements, param, tensor_category::gradients, event_kind::bwd_embed,
         event_kind::bwd_embed);
    span("fsdp.embedding.reduce_scatter_input", padded, reduce, tensor_category::gradients, event_kind::bwd_embed,
         event_kind::bwd_embed);
  }
}

}  // namespace trainplan
