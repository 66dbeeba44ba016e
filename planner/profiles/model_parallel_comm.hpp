#pragma once
// The collectives of Megatron-Core's model parallelism, for the stacks that run it (Megatron-LM, and the harness's
// plan on several GPUs): tensor parallelism's per-layer all-reduces (or, with sequence parallelism, all-gathers and
// reduce-scatters), the pipeline's sends between stages, expert parallelism's all-to-alls; and the data-parallel
// gradient reduction and parameter gather of its DistributedDataParallel and distributed optimizer.
#include "planner/model/model_facts.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/time/communication.hpp"

namespace trainplan {

// Tensor, pipeline and expert parallelism's collectives for one step of the layers this GPU holds (facts: a
// pipeline stage's share).
void add_model_parallel_comm(step_comm& comm, const model_spec& m, const run_config& run, const precision_layout& layout,
                             const model_facts& facts);

// Megatron-Core's data-parallel collectives: with the distributed optimizer (--zero 1), the gradients
// reduce-scattered and the updated parameters all-gathered; without it, the gradients all-reduced; each in
// buckets, the reduction overlapped with the last micro-batch's backward (overlap_grad_reduce).
void add_megatron_data_parallel_comm(step_comm& comm, const run_config& run, const precision_layout& layout,
                                     const model_facts& facts);

// ZeRO's collectives as the paper describes them (Rajbhandari et al. 2020, Sec. 7), for stacks whose own are not
// written: stage 0 all-reduces the gradients (in 25 MiB buckets over the last backward, as PyTorch DDP); stages 1
// and 2 reduce-scatter them (stage 2 in every micro-batch's backward) and all-gather the updated parameters after
// the step; stage 3 all-gathers each layer's parameters before its forward and again before its backward, and
// reduce-scatters its gradients after it, in every micro-batch.
// `params`: what this GPU trains (its stage's, split by tensor and expert parallelism: local_params; or the
// adapters), over `layers` layers.
void add_paper_zero_comm(step_comm& comm, const run_config& run, const precision_layout& layout, double params,
                         std::uint64_t layers);
// The parameters this GPU holds: its stage's (facts), split by tensor parallelism, its share of the routed experts.
double local_params(const run_config& run, const model_facts& facts);

}  // namespace trainplan
