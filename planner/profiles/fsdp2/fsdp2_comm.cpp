// FSDP2's collectives (fsdp2_comm.hpp). Sources: torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
// (pre_forward's unshard, post_forward's reshard, pre_backward's unshard, post_backward's foreach_reduce),
// _fsdp_collectives.py (foreach_all_gather into one flat buffer of the padded unit in param_dtype;
// foreach_reduce's reduce-scatter of the padded unit in reduce_dtype), _fsdp_state.py (implicit forward
// prefetching: the all-gather stream runs ahead of the compute stream as far as the CPU issues it; backward
// prefetching of the next unit by default); torchtitan/distributed/fsdp.py (reshard_after_forward for the layers,
// not for the last unit).
#include "planner/profiles/fsdp2/fsdp2_comm.hpp"

#include "planner/profiles/fsdp2/fsdp2_state.hpp"

namespace trainplan {

step_comm fsdp2_communication(const model_spec& m, const run_config& run, const precision_layout& layout,
                              const model_facts& facts) {
  step_comm comm;
  const std::uint64_t N = run.data_parallel();
  if (N <= 1) return comm;
  const fsdp2_units u = fsdp2_unit_sizes(facts, N);
  const double mb = static_cast<double>(run.grad_accum), L = static_cast<double>(m.layers);
  const double param = static_cast<double>(dtype_bytes(layout.weights));
  const double reduce = static_cast<double>(dtype_bytes(layout.optimizer_grad_dtype()));
  const double layer = static_cast<double>(u.layer.padded_elements());
  const double embedding = static_cast<double>(u.embedding.padded_elements());
  const double head = static_cast<double>(u.head.padded_elements());
  // Forward: the embedding's gather starts the micro-batch with nothing to hide behind; the layers' and the head's
  // are issued ahead of the compute that precedes them.
  if (embedding > 0)
    comm.ops.push_back({"data.all_gather (embedding, forward)", collective::all_gather, comm_group::data, embedding * param,
                        mb, comm_window::forward, mb});
  comm.ops.push_back({"data.all_gather (layers, forward)", collective::all_gather, comm_group::data, layer * param, L * mb,
                      comm_window::forward, embedding > 0 ? 0 : mb});
  comm.ops.push_back({"data.all_gather (head, forward)", collective::all_gather, comm_group::data, head * param, mb,
                      comm_window::forward, 0});
  // Backward: the layers and the embedding were resharded after their forward and are gathered again, each
  // prefetched during the backward of the unit after it; the head unit stayed gathered.
  comm.ops.push_back({"data.all_gather (layers, backward)", collective::all_gather, comm_group::data, layer * param, L * mb,
                      comm_window::backward, 0});
  if (embedding > 0)
    comm.ops.push_back({"data.all_gather (embedding, backward)", collective::all_gather, comm_group::data,
                        embedding * param, mb, comm_window::backward, 0});
  // Every unit's gradients reduce-scattered after its backward, in each micro-batch (torchtitan leaves gradient
  // synchronisation on under accumulation); the last (the embedding's, or layer 0's) after the compute has ended.
  comm.ops.push_back({"data.reduce_scatter (head)", collective::reduce_scatter, comm_group::data, head * reduce, mb,
                      comm_window::backward, 0});
  comm.ops.push_back({"data.reduce_scatter (layers)", collective::reduce_scatter, comm_group::data, layer * reduce, L * mb,
                      comm_window::backward, embedding > 0 ? 0 : mb});
  if (embedding > 0)
    comm.ops.push_back({"data.reduce_scatter (embedding)", collective::reduce_scatter, comm_group::data,
                        embedding * reduce, mb, comm_window::backward, mb});
  return comm;
}

}  // namespace trainplan
