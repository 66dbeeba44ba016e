// DeepSpeed ZeRO's per-rank model state and buffers (deepspeed_state.hpp), stage by stage, as
// DeepSpeedZeroOptimizer (stages 1 and 2) and DeepSpeedZeroOptimizer_Stage3 allocate them.
#include "planner/profiles/deepspeed/deepspeed_state.hpp"

#include "planner/memory/model_state.hpp"

#include <algorithm>

#include "planner/memory/inventory_builder.hpp"
#include "planner/run/optimizer.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {

deepspeed_buckets deepspeed_buckets_for(const model_spec& m, int stage) {
  deepspeed_buckets b;
  const std::uint64_t h = m.hidden;
  b.reduce_bucket = checked_mul(h, h, "reduce_bucket_size");
  b.prefetch_bucket = checked_mul(b.reduce_bucket, 9, "stage3_prefetch_bucket_size") / 10;  // int(0.9 * h * h)
  b.persistence = checked_mul(10, h, "stage3_param_persistence_threshold");
  // transformers' ds_config_zero2.json and ds_config_zero3.json (docs/source/en/deepspeed.md) set overlap_comm;
  // DeepSpeed's own default is on for stage 3 only (config.py, overlap_comm_valid).
  b.overlap_comm = stage >= 2;
  return b;
}

std::uint64_t zero3_layers_kept(std::uint64_t layers, std::uint64_t layer_elements, std::uint64_t head_elements,
                                std::uint64_t max_reuse_distance) {
  std::uint64_t kept = 0;
  for (std::uint64_t i = 0; i < layers; ++i) {
    // Elements met in the trace between layer L-1-i's forward and its backward.
    const std::uint64_t between = 2 * i * layer_elements + 2 * head_elements;
    if (between >= max_reuse_distance) break;
    ++kept;
  }
  return kept;
}

void add_deepspeed_state(inventory& out, const model_spec& m, const run_config& run, const precision_layout& layout,
                         const model_facts& facts) {
  const std::uint64_t N = run.data_parallel();
  const std::int64_t L = static_cast<std::int64_t>(m.layers);
  const param_counts& pc = facts.counts;
  const deepspeed_buckets buckets = deepspeed_buckets_for(m, run.zero);
  inventory_builder inv(L, out.tensors);
  const dtype bit16 = layout.weights, master = layout.master.value_or(dtype::fp32);
  const dtype grads = layout.optimizer_grad_dtype();
  auto share = [&](std::uint64_t n) { return (n + N - 1) / N; };
  const std::uint64_t P = pc.total;
  const std::int64_t bwd0 = inv.bwd_layer0(), fwd0 = inv.fwd_layer0();

  // The fp32 master partition and the optimizer's state over it (created by the first step).
  inv.model_state("deepspeed.master", share(P), master, tensor_category::master_weights, state_lifetime::whole_run,
                  tensor_role::master_weights);
  for (const optimizer_state_buffer& st : optimizer_state(run.optimizer, facts.tensors, facts.layers, layout.optimizer_state)) {
    const std::uint64_t bytes = share(st.bytes);
    tensor_spec& t = inv.add(st.name, {bytes / dtype_bytes(st.type)}, st.type, tensor_category::optimizer);
    t.bytes = bytes;
    t.lifetime = state_lifetime::from_first_optimizer;
    t.role = tensor_role::optimizer_state;
  }
  // A buffer made in each micro-batch's backward and dropped at its end (the IPG buckets: setup_buckets on a
  // backward's first gradient hook, _release_ipg_buffers in its epilogue).
  auto backward_span = [&](std::string_view name, std::uint64_t elements, dtype type) {
    tensor_spec& t = inv.span(name, {elements}, type, tensor_category::gradients, event_kind::bwd_head, event_kind::bwd_embed);
    t.role = tensor_role::communication;
  };
  auto optimizer_temporary = [&](std::string_view name, std::uint64_t elements, dtype type) {
    inv.model_state(name, elements, type, tensor_category::optimizer, state_lifetime::optimizer_only,
                    tensor_role::optimizer_temporary);
  };
  const std::uint64_t largest_layer = std::max(pc.per_layer, pc.per_dense_layer);

  if (run.zero <= 2) {
    // bit16_groups_flat: every parameter in one flat 16-bit buffer, padded to a multiple of 2N elements
    // (nccl_start_alignment_factor x dp), that the model's parameters view; all-gathered in place after the step.
    const std::uint64_t padded = (P + 2 * N - 1) / (2 * N) * (2 * N);
    inv.model_state("deepspeed.params", padded, bit16, tensor_category::weights, state_lifetime::whole_run,
                    tensor_role::trained_weights);
    // The reduction's IPG bucket(s): one of reduce_bucket_size, two with overlap_comm.
    backward_span("deepspeed.ipg_buckets", checked_mul(buckets.overlap_comm ? 2 : 1, buckets.reduce_bucket, "IPG"), bit16);
    // grads_in_partition: the gradients of this rank's partition, 16-bit, from the reduction to the step (with
    // accumulation, stage 2 makes a fresh one each micro-step while views of the previous one are added to).
    inv.model_state("deepspeed.grads_in_partition", share(P), grads, tensor_category::gradients,
                    state_lifetime::backward_to_optimizer, tensor_role::gradients);
    if (run.zero == 2 && run.grad_accum > 1)
      inv.model_state("deepspeed.grads_in_partition.previous", share(P), grads, tensor_category::gradients,
                      state_lifetime::backward_to_optimizer, tensor_role::gradients);
    if (run.zero == 1) {
      // Stage 1 without overlap_comm: autograd keeps every parameter's full 16-bit .grad, accumulated across
      // micro-steps and reduced at the boundary, each freed once copied into a bucket (their .grad appears layer by
      // layer, as PyTorch makes it).
      tensor_spec& t = inv.model_state("layer{}.grads", pc.per_layer, grads, tensor_category::gradients,
                                       state_lifetime::gradient_from_backward, tensor_role::gradients, param_scope::layer);
      inv.per_layer(t);
      t.intervals[0] = {bwd0, -1, 0, 0};
      // Each names the parameters it stands for (param_scope), as PyTorch's .grad of each does: the op-by-op
      // backward allocates them part by part (planner/allocator/allocator_schedule.cpp).
      auto grad = [&](std::string_view name, std::uint64_t elements, event_kind from, std::int64_t layer, param_scope scope) {
        if (elements == 0) return;
        tensor_spec& g = inv.model_state(name, elements, grads, tensor_category::gradients,
                                         state_lifetime::gradient_from_backward, tensor_role::gradients, scope);
        g.intervals[0] = {event_index(from, layer, L), 0, 0, 0};
      };
      grad("grads.head", pc.final_norm + pc.lm_head + (m.tied_embeddings ? pc.embedding : 0), event_kind::bwd_layer, L - 1,
           param_scope::head);
      if (!m.tied_embeddings) grad("grads.embedding", pc.embedding, event_kind::bwd_embed, 0, param_scope::embedding);
      add_incoming_table_gradients(inv, m, grads);
    } else {
      // Stage 2: each gradient is copied into the bucket as its hook fires and reduced when the bucket fills: a
      // layer's full gradients exist while its backward runs.
      tensor_spec& t = inv.layer_intervals("layer{}.grads.in_flight", {largest_layer}, grads, tensor_category::gradients,
                                           {{bwd0, -1, bwd0, -1}});
      t.role = tensor_role::gradients;
    }
    // step(): the partition's gradients flattened in 16 bits, then cast to the master dtype for the update.
    optimizer_temporary("deepspeed.step.flat_grads", share(P), grads);
    optimizer_temporary("deepspeed.step.fp32_grads", share(P), master);
    return;
  }

  // ---- ZeRO-3 ---------------------------------------------------------------------------------------------------
  // The 16-bit partition of every parameter (padded per parameter to a multiple of N: Init._padding_size) and
  // the gradient partitions (gradient_accumulation_dtype: the model's 16 bits unless grad_accum_dtype says fp32),
  // one flat buffer each for the whole run; the parameters at or under the persistence threshold (the norms'
  // weights) are never partitioned.
  std::uint64_t padded_shard = 0, persistent = 0;
  for (const param_tensor& p : facts.tensors) {
    const std::uint64_t copies = facts.layers.instances(p);
    if (p.count <= buckets.persistence) persistent = checked_add(persistent, checked_mul(p.count, copies, "ZeRO-3"), "ZeRO-3");
    padded_shard = checked_add(padded_shard, checked_mul(share(p.count), copies, "ZeRO-3"), "ZeRO-3");
  }
  inv.model_state("deepspeed.params.partition", padded_shard, bit16, tensor_category::weights, state_lifetime::whole_run,
                  tensor_role::trained_weights);
  inv.model_state("deepspeed.params.persistent", persistent, bit16, tensor_category::weights, state_lifetime::whole_run,
                  tensor_role::trained_weights);
  inv.model_state("deepspeed.grad_partitions", padded_shard, grads, tensor_category::gradients, state_lifetime::whole_run,
                  tensor_role::gradients);
  inv.model_state("deepspeed.ipg_bucket", buckets.reduce_bucket, bit16, tensor_category::gradients, state_lifetime::whole_run,
                  tensor_role::communication);
  // A layer's gathered parameters: the all-gather's flat buffer and the per-parameter tensors torch.cat builds
  // from it (AllGatherCoalescedHandle.wait), both while the layer runs; released after its forward unless the
  // trace reaches its backward within max_reuse_distance (the last few layers stay gathered until then), and
  // gathered again for its backward.
  const std::uint64_t head = m.tied_embeddings ? pc.embedding : pc.lm_head;
  const std::uint64_t kept = zero3_layers_kept(m.layers, largest_layer, head, buckets.max_reuse_distance);
  auto gathered = [&](std::uint64_t begin, std::uint64_t end, bool keep) {
    if (begin >= end) return;
    inv.set_layer_range(begin, end);
    for (std::string_view name : {"layer{}.zero3.all_gather_output", "layer{}.zero3.gathered_params"}) {
      tensor_spec& t = keep ? inv.layer_intervals(name, {largest_layer}, bit16, tensor_category::weights, {{fwd0, 1, bwd0, -1}})
                            : inv.layer_intervals(name, {largest_layer}, bit16, tensor_category::weights,
                                                  {{fwd0, 1, fwd0, 1}, {bwd0, -1, bwd0, -1}});
      t.role = tensor_role::communication;
    }
    inv.all_layers();
  };
  gathered(0, m.layers - kept, false);
  gathered(m.layers - kept, m.layers, true);
  // Prefetch: up to stage3_prefetch_bucket_size elements of the next modules in flight; the reduce-scatter's
  // staging: the torch.cat of a bucket, up to three in flight (max_param_reduce_events = 2, and the current one).
  tensor_spec& prefetch = inv.span("deepspeed.prefetch", {buckets.prefetch_bucket}, bit16, tensor_category::weights,
                                   event_kind::fwd_embed, event_kind::bwd_embed);
  prefetch.role = tensor_role::communication;
  backward_span("deepspeed.reduce_scatter_staging", checked_mul(3, buckets.reduce_bucket, "staging"), bit16);
  // A layer's full gradients, made by autograd while its backward runs and partitioned by its hooks.
  tensor_spec& g = inv.layer_intervals("layer{}.grads.in_flight", {largest_layer}, grads, tensor_category::gradients,
                                       {{bwd0, -1, bwd0, -1}});
  g.role = tensor_role::gradients;
  // step(): one sub-group at a time, its gradients flattened in 16 bits and cast to fp32.
  const std::uint64_t sub_group = std::min(padded_shard, buckets.sub_group);
  optimizer_temporary("deepspeed.step.flat_grads", sub_group, grads);
  optimizer_temporary("deepspeed.step.fp32_grads", sub_group, master);
}

}  // namespace trainplan
