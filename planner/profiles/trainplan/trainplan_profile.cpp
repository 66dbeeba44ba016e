#include "planner/profiles/trainplan/trainplan_profile.hpp"

#include <algorithm>

#include "planner/memory/inventory_builder.hpp"
#include "planner/memory/model_state.hpp"
#include "planner/profiles/fused_layer.hpp"
#include "planner/profiles/model_parallel_comm.hpp"
#include "planner/profiles/own_kernels.hpp"
#include "planner/profiles/step_frame.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {
namespace {

// The harness keeps bf16 weights with an fp32 master copy, as llm.c.
precision_regime default_precision(bool) { return precision_regime::bf16_mixed; }

void check(const model_spec&, const run_config& run, const precision_layout&) {
  refuse_library_kernels("trainplan", "in one fused classifier kernel over the whole logits, as llm.c", run);
}

constexpr stack_traits traits{
    .vocab_pad_multiple = 128,  // as llm.c pads: aligned GEMMs for the head
    .passes_window_to_kernel = true,
    .keeps_fused_projections = false,
};

// llm.c's fused classifier, and the residual add fused with the next norm (kernels/norm.hpp).
constexpr fused_layer_options options{.traits = traits, .loss = fused_loss::fused_classifier, .fused_residual_norm = true};

// What the harness's own kernels need beyond the tensors of the model, allocated by name like every other
// buffer so that the harness's memory identity stays exact (no device memory outside the
// tracker). Sizes follow the kernels (kernels/norm.hpp, embedding.hpp, cross_entropy.hpp, adamw.hpp).
void add_harness_scratch(inventory_builder& inv, const model_spec& m, const run_config& run, const pipeline_stage& stage) {
  const std::uint64_t b = run.micro_batch, s = run.seq, h = m.hidden, rows = checked_mul(b, s, "tokens");
  // The norms' weight (and bias) gradients: each thread block sums its rows into its own fp32 row, and a
  // second pass adds the rows into the gradients; no atomics, the same sum every run.
  const std::uint64_t norm_params = m.family == model_family::gpt ? 2 : 1;
  inv.span("bwd.norm_partials", {std::min(rows, harness_norm_partial_rows), norm_params * h}, dtype::fp32,
           tensor_category::activation_grads, event_kind::bwd_head, event_kind::bwd_embed);
  // The embedding gradients summed in fp32, then added to the stored ones once (rounded once): the V rows of
  // real tokens only, the padded rows get no gradient (vocab_rows).
  if (stage.first)
    inv.span("bwd.embed_grad_fp32", {checked_mul(m.vocab + (m.max_positions > 0 ? s : 0), h, "embedding gradient")},
             dtype::fp32, tensor_category::activation_grads, event_kind::bwd_embed, event_kind::bwd_embed);
  // Each token's loss, summed over the step's micro-batches on the device and read once after the last.
  if (stage.last)
    inv.model_state("loss.token_losses", rows, dtype::fp32, tensor_category::logits, state_lifetime::whole_run,
                    tensor_role::data);
  // fp16's loss scaling: the flag the non-finite check raises, read before the optimizer step.
  if (run.precision == precision_regime::fp16_mixed)
    inv.model_state("optimizer.non_finite_flag", 1, dtype::i32, tensor_category::optimizer, state_lifetime::optimizer_only,
                    tensor_role::data);
}

inventory build(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts,
                const pipeline_stage& stage) {
  inventory out;
  out.tensors.reserve(64);  // one allocation per configuration: sweeps evaluate millions
  // On several GPUs, the buffers ZeRO's paper describes (the harness trains on one).
  add_model_state(out, m, run, layout, facts, traits, {.zero3_gather_buffers = true, .ddp_bucket = true});
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  const fused_memory memory{inv, facts.counts, stage};
  walk_fused_step({m, run, layout, options}, &memory, nullptr);
  add_harness_scratch(inv, m, run, stage);
  return finish_inventory(std::move(out), m);
}

stack_overhead overhead(const calibration& calib) { return {calib.context_bytes("trainplan"), calib.cublas_workspace_bytes}; }
double slack(const calibration& calib) { return calib.slack_fraction("trainplan"); }

step_ops micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                         const trained_share& trained) {
  step_ops ops = micro_batch_step_ops(m, run, layout, selective_rerun::attention_core,
                                      [&](step_rows& rows) { walk_fused_step({m, run, layout, options}, nullptr, &rows); });
  add_optimizer_op(ops, optimizer_kernels::multi_tensor_fused, trained);
  return ops;
}

// On several GPUs, Megatron-Core's model-parallel collectives and ZeRO's as the paper describes them (the harness
// trains on one GPU).
step_comm communication(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts) {
  step_comm comm;
  add_model_parallel_comm(comm, m, run, layout, facts);
  add_paper_zero_comm(comm, run, layout, local_params(run, facts), facts.layers.all);
  return comm;
}

std::string overhead_note(const calibration& calib) {
  const stack_calibration* own = calib.stack("trainplan");
  return own && own->cuda_context_bytes ? "data/calibration.json: this harness measured by plan calibrate on this GPU"
                                        : "data/calibration.json; initial literature values until calibrated";
}

}  // namespace

const stack_profile& trainplan_profile() {
  static const stack_profile profile{
      .name = "trainplan",
      .title = "trainplan's own harness",
      .assumption = "framework trainplan: exactly the buffers this project's harness allocates (plan validate checks them "
                    "byte for byte); activation gradients use a fixed set of backward buffers reused by every layer (as "
                    "llm.c); the vocabulary tables and the logits padded to a multiple of 128 rows (llm.c's Vp), the "
                    "fused classifier writing the logits' gradient over them",
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
