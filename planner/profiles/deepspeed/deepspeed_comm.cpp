// DeepSpeed ZeRO's collectives (deepspeed_comm.hpp). Sources: deepspeed/runtime/zero/stage_1_and_2.py
// (reduce_ipg_grads and average_tensor: with reduce_scatter on, DeepSpeed's default, each bucket's slices are
// reduced to the ranks that own them, a reduce-scatter's traffic; overlap_comm runs them on their own stream
// beside the backward; stage 1 without overlap_comm reduces at the accumulation boundary; step() ends with
// all_gather_dp_groups of the 16-bit partitions), stage3.py and partitioned_param_coordinator.py (fetch_sub_module
// gathers a module's parameters, prefetching the next up to stage3_prefetch_bucket_size; release after forward
// unless reused within max_reuse_distance; __reduce_and_partition_ipg_grads reduce-scatters full buckets).
#include "planner/profiles/deepspeed/deepspeed_comm.hpp"

#include <algorithm>

#include "planner/profiles/deepspeed/deepspeed_state.hpp"

namespace trainplan {

step_comm deepspeed_communication(const model_spec& m, const run_config& run, const precision_layout& layout,
                                  const model_facts& facts) {
  step_comm comm;
  if (run.data_parallel() <= 1) return comm;
  const deepspeed_buckets buckets = deepspeed_buckets_for(m, run.zero);
  const param_counts& pc = facts.counts;
  const double P = static_cast<double>(pc.total), mb = static_cast<double>(run.grad_accum);
  const double bit16 = static_cast<double>(dtype_bytes(layout.weights));
  const double grads = static_cast<double>(dtype_bytes(layout.optimizer_grad_dtype()));
  const double bucket = static_cast<double>(buckets.reduce_bucket) * grads;
  if (run.zero <= 2) {
    if (run.zero == 1)  // at the boundary, after the last backward: nothing left to hide behind
      add_buckets(comm, "data.reduce_scatter (gradients)", collective::reduce_scatter, comm_group::data, P * grads, bucket,
                  1, comm_window::none, false);
    else
      add_buckets(comm, "data.reduce_scatter (gradients)", collective::reduce_scatter, comm_group::data, P * grads, bucket,
                  mb, comm_window::backward, true);
    add_buckets(comm, "data.all_gather (parameters)", collective::all_gather, comm_group::data, P * bit16, 0, 1,
                comm_window::none, false);
    return comm;
  }
  // Stage 3: a layer's parameters gathered before its forward (the first, the embedding's, with nothing before
  // it) and, except the last layers kept gathered until their backward, before its backward; the head gathered
  // once a micro-batch (its backward follows its forward within the reuse distance).
  const double L = static_cast<double>(m.layers);
  const double layer = static_cast<double>(std::max(pc.per_layer, pc.per_dense_layer));
  const double head = static_cast<double>(m.tied_embeddings ? pc.embedding : pc.lm_head + pc.final_norm);
  const double embedding = m.tied_embeddings ? 0 : static_cast<double>(pc.embedding);
  const double kept = static_cast<double>(
      zero3_layers_kept(m.layers, static_cast<std::uint64_t>(layer), static_cast<std::uint64_t>(head), buckets.max_reuse_distance));
  if (embedding > 0)
    comm.ops.push_back({"data.all_gather (embedding, forward)", collective::all_gather, comm_group::data, embedding * bit16,
                        mb, comm_window::forward, mb});
  comm.ops.push_back({"data.all_gather (layers, forward)", collective::all_gather, comm_group::data, layer * bit16, L * mb,
                      comm_window::forward, embedding > 0 ? 0 : mb});
  comm.ops.push_back({"data.all_gather (head)", collective::all_gather, comm_group::data, head * bit16, mb,
                      comm_window::forward, 0});
  comm.ops.push_back({"data.all_gather (layers, backward)", collective::all_gather, comm_group::data, layer * bit16,
                      std::max(0.0, L - kept) * mb, comm_window::backward, 0});
  if (embedding > 0)
    comm.ops.push_back({"data.all_gather (embedding, backward)", collective::all_gather, comm_group::data,
                        embedding * bit16, mb, comm_window::backward, 0});
  // The gradients, reduce-scattered in reduce_bucket_size buckets as backward makes them; the last after it.
  add_buckets(comm, "data.reduce_scatter (gradients)", collective::reduce_scatter, comm_group::data, P * grads, bucket, mb,
              comm_window::backward, true);
  return comm;
}

}  // namespace trainplan
