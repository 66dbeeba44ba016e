// DeepSpeed's registration (deepspeed_profile.hpp): its defaults, what it refuses, its inventory (deepspeed_state.cpp
// beside the activations Hugging Face's modules save) and its operations (the modules' kernels and the optimizer
// over the partition).
#include "planner/profiles/deepspeed/deepspeed_profile.hpp"

#include <fmt/format.h>

#include "planner/memory/inventory_builder.hpp"
#include "planner/profiles/deepspeed/deepspeed_comm.hpp"
#include "planner/profiles/deepspeed/deepspeed_state.hpp"
#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/profiles/hf/hf_loss_chunks.hpp"
#include "planner/profiles/hf/hf_packing.hpp"
#include "planner/profiles/hf/hf_profile.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

// The engine's bf16 mode: the model in bf16, an fp32 master partition.
precision_regime default_precision(bool) { return precision_regime::bf16_mixed; }

void check(const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (run.tp > 1 || run.pp > 1 || run.ep > 1)
    throw input_error("--framework deepspeed models ZeRO over data-parallel ranks alone: no --tp, --pp or --ep");
  if (run.zero < 1)
    throw input_error("--framework deepspeed: ZeRO stage 1, 2 or 3 (--zero)");
  if (run.recompute == recompute_mode::selective)
    throw input_error("--framework deepspeed checkpoints whole decoder layers (the Trainer's gradient_checkpointing): "
                      "--recompute none or full");
  if (run.finetune != finetune_kind::full)
    throw input_error("--framework deepspeed models full training: LoRA and QLoRA under DeepSpeed are not modelled");
  if (layout.regime != precision_regime::bf16_mixed && layout.regime != precision_regime::fp16_mixed)
    throw input_error(fmt::format("--framework deepspeed trains in its bf16 or fp16 mode (bf16-mixed, fp16-mixed), not {}",
                                  precision_name(layout.regime)));
  if (run.zero <= 2 && layout.grad_accum)
    throw input_error("--framework deepspeed: an fp32 gradient accumulation dtype in stages 1 and 2 selects other "
                      "optimizers (BF16_Optimizer), not modelled");
  if (m.is_moe() || m.is_mla())
    throw input_error("--framework deepspeed: Mixture-of-Experts and latent-attention layers are not modelled");
  if (run.offload != offload_mode::none) throw input_error("--framework deepspeed: ZeRO-Offload is not modelled");
  check_hf_loss("deepspeed", run);
  check_hf_attention("deepspeed", m, layout, run);
  check_hf_packing("deepspeed", run);
}

inventory build(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts,
                const pipeline_stage& stage) {
  inventory out;
  out.tensors.reserve(96);
  add_deepspeed_state(out, m, run, layout, facts);
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  inv.set_inflight(stage.inflight);
  const hf_program_order order = add_hf_activations(inv, m, run, layout, facts.counts, out.backward_programs, hf_traits);
  out.forward_in_program_order = order.forward;
  out.coarse_forward_reason = order.coarse_forward;
  out.coarse_backward_reason = order.coarse_backward;
  return finish_inventory(std::move(out), m);
}

// The same PyTorch process as Hugging Face's eager training: its CUDA context and cuBLAS workspaces.
stack_overhead overhead(const calibration& calib) { return hf_profile().overhead(calib); }
double slack(const calibration& calib) { return hf_profile().slack_fraction(calib); }

step_ops micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                         const trained_share& trained) {
  return hf_profile().micro_batch_ops(m, run, layout, trained);
}

void describe(const model_spec& m, const run_config& run, const precision_layout& layout, std::vector<std::string>& lines) {
  const deepspeed_buckets b = deepspeed_buckets_for(m, run.zero);
  lines.push_back(fmt::format(
      "DeepSpeed ZeRO-{} as the Trainer configures it: reduce_bucket_size {} (\"auto\": h^2){}, overlap_comm {}, "
      "gradients in {}, an fp32 master partition",
      run.zero, b.reduce_bucket,
      run.zero == 3 ? fmt::format(", stage3_prefetch_bucket_size {}, stage3_param_persistence_threshold {}, "
                                  "max_reuse_distance and sub_group_size 1e9",
                                  b.prefetch_bucket, b.persistence)
                    : std::string(),
      b.overlap_comm ? "on" : "off", dtype_name(layout.optimizer_grad_dtype())));
  hf_profile().describe(m, run, layout, lines);
}

std::string overhead_note(const calibration& calib) { return hf_profile().overhead_note(calib); }

}  // namespace

const stack_profile& deepspeed_profile() {
  static const stack_profile profile{
      .name = "deepspeed",
      .title = "DeepSpeed ZeRO + Hugging Face transformers",
      .assumption = "framework deepspeed: DeepSpeed ZeRO (stage 1, 2 or 3) under Hugging Face's Trainer, the model in "
                    "16 bits with an fp32 master partition; stages 1 and 2 all-reduce the gradients in buckets and "
                    "all-gather the parameters after the step, stage 3 gathers each module's parameters before it runs "
                    "and reduce-scatters its gradients; the activations a 16-bit model's modules save",
      .default_precision = default_precision,
      .default_recompute = recompute_mode::none,
      .recompute_help = "",
      .offers_selective_recompute = false,
      .runs_model_dropout = true,
      .check = check,
      .offers_optimizer_impl = false,
      .offers_expandable_segments = true,
      .lora_through_peft = false,
      .hugging_face_modules = true,
      .traits = hf_traits,
      .build_inventory = build,
      .allocator = allocator_model::pytorch_replay,
      .overhead = overhead,
      .slack_fraction = slack,
      .micro_batch_ops = micro_batch_ops,
      .grads_per_parameter = false,
      .communication = deepspeed_communication,
      .describe = describe,
      .overhead_note = overhead_note,
      .calibration_keys = {},
      .calibrated_as = hf_profile,
      .default_zero = 2,
  };
  return profile;
}

}  // namespace trainplan
