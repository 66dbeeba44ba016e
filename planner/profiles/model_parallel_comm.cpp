// Megatron-Core's model-parallel and data-parallel collectives (model_parallel_comm.hpp). Sources:
// megatron/core/tensor_parallel/mappings.py and layers.py (the all-reduces, all-gathers and reduce-scatters around
// column- and row-parallel linears; LinearWithGradAccumulationAndAsyncCommunication launching the backward's
// collective beside the weight-gradient GEMM), pipeline_parallel/schedules.py and p2p_communication.py (one
// activation sent forward and one gradient sent back per micro-batch and stage boundary, batched or overlapped),
// Transformer Engine's attention/dot_product_attention/context_parallel.py (AttnFuncWithCPAndKVP2P: context
// parallelism's ring of key and value blocks), transformer/moe/token_dispatcher.py
// (MoEAlltoAllTokenDispatcher: dispatch and combine), distributed/distributed_data_parallel.py and
// param_and_grad_buffer.py (buckets of max(40M, 1M x dp) elements, reduce-scatter into the distributed optimizer's
// shard or all-reduce, the parameters' all-gather after the step).
#include "planner/profiles/model_parallel_comm.hpp"

#include <algorithm>

namespace trainplan {

void add_model_parallel_comm(step_comm& comm, const model_spec& m, const run_config& run, const precision_layout& layout,
                             const model_facts& facts) {
  const double mb = static_cast<double>(run.grad_accum), tp = static_cast<double>(run.tp);
  const double act = static_cast<double>(dtype_bytes(layout.activations));
  // One micro-batch's activations at a layer boundary, s x b x h (s: this GPU's seq / cp tokens of a sequence):
  // what each tensor-parallel collective moves whole (the all-reduce's buffer, the all-gather's output, the
  // reduce-scatter's input).
  const double s = static_cast<double>(run.seq_per_gpu());
  const double M = s * static_cast<double>(run.micro_batch) * static_cast<double>(m.hidden) * act;
  const double layers = static_cast<double>(facts.layers.all);
  const double forwards = run.recompute == recompute_mode::full ? 2 : 1;  // full recomputation reruns the forward's
  if (run.tp > 1) {
    // Per layer, two column/row-parallel pairs (attention, MLP). Without sequence parallelism: forward, an
    // all-reduce after each row-parallel linear; backward, one of each column-parallel linear's input gradient.
    // With it: forward, an all-gather into each column-parallel linear and a reduce-scatter after each
    // row-parallel one; backward, their reverse (a reduce-scatter and an all-gather each) and the all-gather of
    // each column-parallel input again for its weight gradient.
    const double per = layers * mb;
    if (run.sequence_parallel) {
      comm.ops.push_back({"tensor.all_gather (forward)", collective::all_gather, comm_group::tensor, M, 2 * per * forwards, comm_window::none});
      comm.ops.push_back({"tensor.reduce_scatter (forward)", collective::reduce_scatter, comm_group::tensor, M, 2 * per * forwards, comm_window::none});
      // Backward, per pair: the row-parallel output's reduce-scatter turns into an all-gather of its gradient
      // (mappings.py, _ReduceScatterToSequenceParallelRegion.backward: _gather_along_first_dim, synchronous), which the
      // linear's backward needs before it starts: exposed. The column-parallel linear's backward
      // (LinearWithGradAccumulationAndAsyncCommunication.backward) gathers its input again asynchronously while it
      // computes the input gradient, then reduce-scatters that gradient asynchronously while it computes the weight
      // gradient: both run beside GEMMs of the weight gradients' size (the window, shared).
      comm.ops.push_back({"tensor.all_gather (backward, output gradients)", collective::all_gather, comm_group::tensor, M, 2 * per, comm_window::none});
      comm.ops.push_back({"tensor.all_gather (backward, inputs again)", collective::all_gather, comm_group::tensor, M, 2 * per, comm_window::weight_gradients});
      comm.ops.push_back({"tensor.reduce_scatter (backward)", collective::reduce_scatter, comm_group::tensor, M, 2 * per, comm_window::weight_gradients});
    } else {
      comm.ops.push_back({"tensor.all_reduce (forward)", collective::all_reduce, comm_group::tensor, M, 2 * per * forwards, comm_window::none});
      comm.ops.push_back({"tensor.all_reduce (backward)", collective::all_reduce, comm_group::tensor, M, 2 * per, comm_window::weight_gradients});
    }
    // The vocabulary-parallel embedding's output and the head's input gradient, where this stage holds them: a tied
    // head reads the embedding's table on one GPU; under pipeline parallelism the last stage holds a copy of the table
    // for the head (Megatron's word_embeddings_for_head) and the first stage no head (facts: the stage's counts).
    const bool head = facts.counts.lm_head > 0 || (m.tied_embeddings && run.pp == 1);
    const double tables = (facts.counts.embedding > 0 ? 1 : 0) + (head ? 1 : 0);
    comm.ops.push_back({"tensor.all_reduce (embedding, head)", collective::all_reduce, comm_group::tensor, M, tables * mb, comm_window::none});
  }
  if (run.cp > 1) {
    // Context parallelism, Transformer Engine's ring (AttnFuncWithCPAndKVP2P, Megatron-Core's cp_comm_type "p2p"):
    // per layer and micro-batch, attention runs cp steps, each on this GPU's queries and one key and value block
    // [b, s/cp, (kv_heads/tp) x (head_dim + v_head_dim)] while the block is sent on to the next GPU and the next
    // received (batched isend/irecv); the step waits for its block before it computes. Forward: cp - 1 sends, each
    // beside one step's attention. Backward: every step sends, the first the key and value block, the last the
    // gradient of a block (dK, dV) travelling back with it, the cp - 2 between both at once (one buffer of two
    // blocks): 2(cp - 1) blocks, twice the forward's. A forward rerun by recomputation runs the ring again.
    const double kv_block = s * static_cast<double>(run.micro_batch) *
                            static_cast<double>(m.kv_width() + m.v_width()) / tp * act;
    const double cp = static_cast<double>(run.cp), per = layers * mb;
    comm.ops.push_back({"context.send_recv (forward K/V)", collective::send_recv, comm_group::context, kv_block,
                        (cp - 1) * per * forwards, comm_window::attention_forward, 0, cp * per * forwards});
    comm.ops.push_back({"context.send_recv (backward K/V or dK/dV)", collective::send_recv, comm_group::context, kv_block,
                        2 * per, comm_window::attention_backward, 0, cp * per});
    if (run.cp > 2)
      comm.ops.push_back({"context.send_recv (backward K/V and dK/dV)", collective::send_recv, comm_group::context,
                          2 * kv_block, (cp - 2) * per, comm_window::attention_backward, 0, cp * per});
  }
  if (run.pp > 1) {
    // Each micro-batch crosses each boundary forward and back (each model chunk's, interleaved); on the critical
    // path of a 1F1B schedule, m v + p - 1 of them each way. The message: one micro-batch's activations (their
    // gradient backward), [s/cp (/tp under sequence parallelism), b, h] (schedules.py, get_tensor_shapes).
    const double message = run.sequence_parallel ? M / tp : M;
    const double v = static_cast<double>(std::max<std::uint64_t>(run.vpp, 1));
    const double each_way = mb * v + static_cast<double>(run.pp) - 1;
    if (run.vpp <= 1) {
      // Plain 1F1B: Megatron-LM turns overlap_p2p_comm off (training/arguments.py: the non-interleaved schedule
      // cannot overlap) and sends with batch_isend_irecv, waited for and followed by torch.cuda.synchronize()
      // (p2p_communication.py, _communicate with batch_p2p_sync): every send exposed.
      comm.ops.push_back({"pipeline.send_recv", collective::send_recv, comm_group::pipeline, message, 2 * each_way,
                          comm_window::none});
    } else {
      // Interleaved 1F1B: overlap_p2p_comm, on by default (--no-overlap-p2p-communication turns it off), posts
      // each send and receive with isend/irecv and waits for a receive only before the chunk that reads it
      // (schedules.py, forward_backward_pipelining_with_interleaving: pp_post_forward, pp_post_backward). A
      // gradient sent back runs beside the next model chunk's forward. An activation sent forward is waited for
      // at once, before its output is freed (deallocate_pipeline_outputs, which Megatron-LM's training sets:
      // "wait for async P2P send before deallocating output tensor", Megatron-LM 260cba7): exposed.
      comm.ops.push_back({"pipeline.send_recv (forward)", collective::send_recv, comm_group::pipeline, message, each_way,
                          comm_window::none});
      comm.ops.push_back({"pipeline.send_recv (backward)", collective::send_recv, comm_group::pipeline, message, each_way,
                          comm_window::forward, 0, mb * v});
    }
  }
  if (run.ep > 1 && m.is_moe()) {
    // Per MoE layer and micro-batch: dispatch and combine in forward, their reverse in backward, each one rank's
    // k T routed rows (T: its tokens, split by tensor parallelism under sequence parallelism).
    const double moe_layers = static_cast<double>(facts.layers.all - std::min(facts.layers.all, facts.layers.dense));
    const double rows = s * static_cast<double>(run.micro_batch) *
                        static_cast<double>(m.experts_per_token) / (run.sequence_parallel ? tp : 1);
    const double send = rows * static_cast<double>(m.hidden) * act;
    comm.ops.push_back({"expert.all_to_all", collective::all_to_all, comm_group::expert, send,
                        moe_layers * mb * (2 * forwards + 2), comm_window::none});
  }
}

double local_params(const run_config& run, const model_facts& facts) {
  const double tp = static_cast<double>(run.tp), ep = static_cast<double>(std::max<std::uint64_t>(run.ep, 1));
  const double experts = static_cast<double>(facts.counts.routed_experts) / tp;
  return static_cast<double>(facts.counts.total) / tp - experts + experts / ep;
}

void add_paper_zero_comm(step_comm& comm, const run_config& run, const precision_layout& layout, double params,
                         std::uint64_t layer_count) {
  if (run.data_context_parallel() <= 1) return;  // the GPUs that hold the same weights
  const double grads = static_cast<double>(dtype_bytes(layout.optimizer_grad_dtype()));
  const double weights = static_cast<double>(dtype_bytes(layout.weights));
  const double mb = static_cast<double>(run.grad_accum), bucket = 25.0 * (1 << 20);
  if (run.zero == 0) {
    add_buckets(comm, "data.all_reduce (gradients)", collective::all_reduce, comm_group::data, params * grads, bucket, 1,
                comm_window::last_backward, true);
  } else if (run.zero <= 2) {
    const bool every = run.zero == 2;
    add_buckets(comm, "data.reduce_scatter (gradients)", collective::reduce_scatter, comm_group::data, params * grads,
                bucket, every ? mb : 1, every ? comm_window::backward : comm_window::last_backward, true);
    add_buckets(comm, "data.all_gather (parameters)", collective::all_gather, comm_group::data, params * weights, 0, 1,
                comm_window::none, false);
  } else {
    const double layers = static_cast<double>(std::max<std::uint64_t>(layer_count, 1));
    const double layer = params / layers;  // the embedding and head spread over the layers' gathers
    comm.ops.push_back({"data.all_gather (forward)", collective::all_gather, comm_group::data, layer * weights,
                        layers * mb, comm_window::forward, mb});
    comm.ops.push_back({"data.all_gather (backward)", collective::all_gather, comm_group::data, layer * weights,
                        layers * mb, comm_window::backward, 0});
    comm.ops.push_back({"data.reduce_scatter (gradients)", collective::reduce_scatter, comm_group::data, layer * grads,
                        layers * mb, comm_window::backward, mb});
  }
}

void add_megatron_data_parallel_comm(step_comm& comm, const run_config& run, const precision_layout& layout,
                                     const model_facts& facts) {
  // The gradients reduce over the data-parallel group with context parallelism (intra_dp_cp_group: the GPUs that
  // hold the same weights); the buckets are sized by the data-parallel group alone (distributed_data_parallel.py).
  const std::uint64_t dp = run.data_parallel();
  if (run.data_context_parallel() <= 1) return;
  const double params = local_params(run, facts);
  if (run.zero >= 2) return add_paper_zero_comm(comm, run, layout, params, facts.layers.all);  // Megatron-FSDP
  const double grads = static_cast<double>(dtype_bytes(layout.optimizer_grad_dtype()));
  const double weights = static_cast<double>(dtype_bytes(layout.weights));
  const double bucket = std::max(40e6, 1e6 * static_cast<double>(dp)) * grads;  // elements x bytes
  if (run.zero >= 1) {
    add_buckets(comm, "data.reduce_scatter (gradients)", collective::reduce_scatter, comm_group::data, params * grads,
                bucket, 1, comm_window::last_backward, true);
    // The updated parameters, gathered after the step (overlap_param_gather off: Megatron-LM's default).
    add_buckets(comm, "data.all_gather (parameters)", collective::all_gather, comm_group::data, params * weights,
                std::max(40e6, 1e6 * static_cast<double>(dp)) * weights, 1, comm_window::none, false);
  } else {
    add_buckets(comm, "data.all_reduce (gradients)", collective::all_reduce, comm_group::data, params * grads, bucket, 1,
                comm_window::last_backward, true);
  }
}

}  // namespace trainplan
