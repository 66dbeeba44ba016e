#include "planner/profiles/megatron/megatron_profile.hpp"

#include "planner/memory/inventory_builder.hpp"
#include "planner/memory/model_state.hpp"
#include "planner/profiles/fused_layer.hpp"
#include "planner/profiles/model_parallel_comm.hpp"
#include "planner/profiles/own_kernels.hpp"
#include "planner/profiles/step_frame.hpp"

namespace trainplan {
namespace {

// Megatron accumulates gradients in fp32 (main_grad) beside bf16 weights and an fp32 master copy.
precision_regime default_precision(bool) { return precision_regime::megatron_bf16; }

void check(const model_spec&, const run_config& run, const precision_layout&) {
  refuse_library_kernels("megatron", "over the whole logits (vocab_parallel_cross_entropy on an fp32 copy)", run);
  // Transformer Engine runs context parallelism inside its flash and fused attention only: it disables its unfused
  // backend under context parallelism (attention/dot_product_attention/utils.py, get_attention_backend).
  if (run.cp > 1 && run.attention == attention_kind::eager)
    throw input_error(fmt::format("--cp {} needs --attention flash: Transformer Engine splits the sequence only in its flash "
                                  "and fused attention", run.cp));
}

constexpr stack_traits traits{
    .vocab_pad_multiple = 1,
    .passes_window_to_kernel = true,  // Transformer Engine hands the window to its flash kernel
    .keeps_fused_projections = false,
    .context_parallel = true,  // --context-parallel-size with cp_comm_type "p2p" (Transformer Engine's ring attention)
};

// Megatron's loss runs on an fp32 copy of the logits (vocab_parallel_cross_entropy upcasts them). Its unfused attention
// (--attention eager: Megatron-LM's CoreAttention, Transformer Engine's UnfusedDotProductAttention) scales, masks and
// softmaxes in one kernel (FusedScaleMaskSoftmax) and drops the probabilities out in another (attention_dropout).
constexpr fused_layer_options options{.traits = traits, .loss = fused_loss::fp32_copy, .attention_dropout_kernel = true};

inventory build(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts,
                const pipeline_stage& stage) {
  inventory out;
  out.tensors.reserve(64);  // one allocation per configuration: sweeps evaluate millions
  // Megatron's gradient buckets are views into its contiguous gradient buffer and the distributed optimizer's
  // gathers write in place (megatron/core/distributed/param_and_grad_buffer.py): no buffer of their own. Its
  // ZeRO-3 (Megatron-FSDP) as the paper describes the gather.
  add_model_state(out, m, run, layout, facts, traits, {.zero3_gather_buffers = true});
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  const fused_memory memory{inv, facts.counts, stage};
  walk_fused_step({m, run, layout, options}, &memory, nullptr);
  return finish_inventory(std::move(out), m);
}

stack_overhead overhead(const calibration& calib) { return {calib.context_bytes("megatron"), calib.cublas_workspace_bytes}; }
double slack(const calibration& calib) { return calib.slack_fraction("megatron"); }

step_ops micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                         const trained_share& trained) {
  step_ops ops = micro_batch_step_ops(m, run, layout, selective_rerun::attention_core,
                                      [&](step_rows& rows) { walk_fused_step({m, run, layout, options}, nullptr, &rows); });
  add_optimizer_op(ops, optimizer_kernels::multi_tensor_fused, trained);
  return ops;
}

// Megatron-Core's model-parallel collectives and its DDP's (with --zero 1, the distributed optimizer's).
step_comm communication(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts) {
  step_comm comm;
  add_model_parallel_comm(comm, m, run, layout, facts);
  add_megatron_data_parallel_comm(comm, run, layout, facts);
  return comm;
}

std::string overhead_note(const calibration&) { return "data/calibration.json; initial literature values until calibrated"; }

}  // namespace

const stack_profile& megatron_profile() {
  static const stack_profile profile{
      .name = "megatron",
      .title = "Megatron-LM + Transformer Engine",
      .assumption = "framework megatron: Megatron-LM + Transformer Engine per-layer activations as Korthikanti et al. 2022 "
                    "count them (34sbh + 5as^2b with dropout, 2sbh under full recomputation)",
      .default_precision = default_precision,
      .check = check,
      .traits = traits,
      .build_inventory = build,
      .allocator = allocator_model::calibrated_slack,
      .overhead = overhead,
      .slack_fraction = slack,
      .micro_batch_ops = micro_batch_ops,
      .communication = communication,
      .overhead_note = overhead_note,
      .calibration_keys = {"cuda_context_bytes", "allocator_slack_fraction"},
  };
  return profile;
}

}  // namespace trainplan
