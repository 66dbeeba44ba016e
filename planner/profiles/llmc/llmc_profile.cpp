#include "planner/profiles/llmc/llmc_profile.hpp"

#include "planner/profiles/fused_layer.hpp"
#include "planner/profiles/llmc/inventory_llmc.hpp"
#include "planner/profiles/step_frame.hpp"

namespace trainplan {
namespace {

// llm.c keeps bf16 weights with an fp32 master copy.
precision_regime default_precision(bool) { return precision_regime::bf16_mixed; }

constexpr stack_traits traits{
    .vocab_pad_multiple = 128,  // train_gpt2.cu: padded_vocab_size, 50257 -> 50304
    .passes_window_to_kernel = true,
    .keeps_fused_projections = false,
};

inventory build(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts&,
                const pipeline_stage&) {
  return build_llmc_inventory(m, run, layout);
}

// llm.c's own context and cuBLASLt workspace (planner/profiles/llmc/inventory_llmc.hpp); it takes its few large
// blocks straight from cudaMalloc: no caching allocator, no slack.
stack_overhead overhead(const calibration&) { return {cuda_program_context_bytes, llmc_cublaslt_workspace_bytes}; }
double slack(const calibration&) { return 0.0; }

step_ops micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                         const trained_share& trained) {
  // llm.c's fused classifier and GELU recomputation; its "selective" (-r 1) recomputes GELU only, not the
  // attention core. (Its memory is its own allocation table, planner/profiles/llmc/inventory_llmc.cpp: one block
  // per kind of activation for every layer and the whole run, laid out as train_gpt2.cu's ActivationTensors.)
  const fused_layer_options options{.traits = traits, .loss = fused_loss::fused_classifier, .recomputes_gelu = true};
  step_ops ops = micro_batch_step_ops(m, run, layout, selective_rerun::own_rows,
                                      [&](step_rows& rows) { walk_fused_step({m, run, layout, options}, nullptr, &rows); });
  add_optimizer_op(ops, optimizer_kernels::single_kernel, trained);  // one kernel over its single parameter buffer
  return ops;
}

// llm.c on several GPUs (train_gpt2.cu, llmc/zero.cuh): in the last micro-step's backward, after each layer, one
// NCCL group reduce-scatters (ZeRO-1) or all-reduces its gradients in place, bf16, on its own stream beside the
// earlier layers' backward (multi_gpu_async_reduce_gradient); the embedding's and final norm's after the backward;
// with ZeRO-1, each layer's updated parameters all-gathered in place after the update.
step_comm communication(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts) {
  step_comm comm;
  if (run.data_parallel() <= 1) return comm;
  const double L = static_cast<double>(m.layers), grads = static_cast<double>(dtype_bytes(layout.grads));
  const double weights = static_cast<double>(dtype_bytes(layout.weights));
  const double layer = static_cast<double>(facts.counts.per_layer);
  const double rest = static_cast<double>(facts.counts.total) - L * layer;
  const collective reduce = run.zero >= 1 ? collective::reduce_scatter : collective::all_reduce;
  comm.ops.push_back({"data.gradients (each layer)", reduce, comm_group::data, layer * grads, L, comm_window::last_backward, 0});
  comm.ops.push_back({"data.gradients (embedding, norm)", reduce, comm_group::data, rest * grads, 1, comm_window::none, 0});
  if (run.zero >= 1) {
    comm.ops.push_back({"data.all_gather (each layer's parameters)", collective::all_gather, comm_group::data, layer * weights,
                        L, comm_window::none, 0});
    comm.ops.push_back({"data.all_gather (embedding, norm)", collective::all_gather, comm_group::data, rest * weights, 1,
                        comm_window::none, 0});
  }
  return comm;
}

std::string overhead_note(const calibration&) { return "data/calibration.json; initial literature values until calibrated"; }

}  // namespace

const stack_profile& llmc_profile() {
  static const stack_profile profile{
      .name = "llmc",
      .title = "llm.c",
      .assumption = "framework llmc: llm.c's buffers (train_gpt2.cu): one activation block for all layers with GELU "
                    "recomputed, the fused classifier writing gradients into the logits, bf16 parameters and gradients, "
                    "fp32 master weights and AdamW state",
      .default_precision = default_precision,
      .default_recompute = recompute_mode::selective,
      .recompute_help = "under --framework llmc: llm.c's -r 0 | -r 1 | -r 2, default selective = -r 1, GELU recomputed",
      .runs_model_dropout = false,  // llm.c has no dropout
      .check = check_llmc_run,
      .traits = traits,
      .build_inventory = build,
      .allocator = allocator_model::cuda_malloc,
      .overhead = overhead,
      .slack_fraction = slack,
      .micro_batch_ops = micro_batch_ops,
      .communication = communication,
      .overhead_note = overhead_note,
      .calibration_keys = {},
  };
  return profile;
}

}  // namespace trainplan
