// FSDP2's registration (fsdp2_profile.hpp): its defaults, what it refuses, its inventory (the sharded state and
// the per-unit buffers of fsdp2_state.cpp beside the activations Hugging Face's modules save) and its operations
// (the modules' kernels, the optimizer over the shard, and the copies FSDP2 makes around each collective).
#include "planner/profiles/fsdp2/fsdp2_profile.hpp"

#include <fmt/format.h>

#include "planner/memory/inventory_builder.hpp"
#include "planner/profiles/fsdp2/fsdp2_comm.hpp"
#include "planner/profiles/fsdp2/fsdp2_state.hpp"
#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/profiles/hf/hf_loss_chunks.hpp"
#include "planner/profiles/hf/hf_packing.hpp"
#include "planner/profiles/hf/hf_profile.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/profiles/hf/hf_selective_checkpoint.hpp"
#include "planner/profiles/hf/hf_traits.hpp"
#include "planner/time/step_ops_builder.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

// Hugging Face's modules as PyTorch runs them (hf_traits); --recompute selective is torchtitan's per-op policy
// (planner/run/selective_checkpoint.hpp), its default activation checkpointing.
constexpr stack_traits fsdp2_traits = [] {
  stack_traits t = hf_traits;
  t.selective_recompute = selective_recompute_kind::op_policy;
  return t;
}();

// MixedPrecisionPolicy(param_dtype=bfloat16) over fp32 parameters: bf16 compute, fp32 master (the shard).
precision_regime default_precision(bool) { return precision_regime::bf16_mixed; }

void check(const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (run.tp > 1 || run.pp > 1 || run.ep > 1)
    throw input_error("--framework fsdp2 models fully_shard over data-parallel ranks alone: no --tp, --pp or --ep");
  if (run.finetune != finetune_kind::full)
    throw input_error("--framework fsdp2 models full training: LoRA and QLoRA under FSDP2 are not modelled");
  if (run.zero != 2 && run.zero != 3)
    throw input_error(fmt::format("--framework fsdp2 shards the parameters: --zero 3 (reshard after forward, the "
                                  "default) or 2 (reshard_after_forward=False), not {}", run.zero));
  if (run.zero == 2)
    throw input_error("--framework fsdp2 --zero 2 (reshard_after_forward=False) is not modelled yet: --zero 3");
  if (layout.regime != precision_regime::bf16_mixed && layout.regime != precision_regime::fp32)
    throw input_error(fmt::format("--framework fsdp2 trains with MixedPrecisionPolicy(param_dtype=bfloat16) "
                                  "(bf16-mixed) or without one (fp32), not {}", precision_name(layout.regime)));
  if (m.is_moe() || m.is_mla())
    throw input_error("--framework fsdp2: Mixture-of-Experts and latent-attention layers are not modelled under FSDP2");
  if (run.offload != offload_mode::none)
    throw input_error("--framework fsdp2: CPUOffloadPolicy is not modelled");
  check_hf_loss("fsdp2", run);
  check_hf_attention("fsdp2", m, layout, run);
  check_hf_packing("fsdp2", run);
  check_hf_selective_checkpoint("fsdp2", m, run, layout);
}

inventory build(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts,
                const pipeline_stage& stage) {
  inventory out;
  out.tensors.reserve(96);
  add_fsdp2_state(out, m, run, layout, facts);
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  inv.set_inflight(stage.inflight);
  const hf_program_order order = add_hf_activations(inv, m, run, layout, facts.counts, out.backward_programs, fsdp2_traits);
  out.forward_in_program_order = order.forward;
  out.coarse_forward_reason = order.coarse_forward;
  out.coarse_backward_reason = order.coarse_backward;
  return finish_inventory(std::move(out), m);
}

// The same PyTorch process as Hugging Face's eager training: its CUDA context and cuBLAS workspaces.
stack_overhead overhead(const calibration& calib) { return hf_profile().overhead(calib); }
double slack(const calibration& calib) { return hf_profile().slack_fraction(calib); }

// The modules' kernels and the optimizer as PyTorch eager runs them, and FSDP2's copies around each unit's
// collectives, per micro-batch (the all-gathers in forward and again in backward, the reduce-scatter):
// copy-in casts the fp32 shard into the flat all-gather input (reads 4, writes 2 bytes an element of the
// shard), copy-out splits the flat output into the unsharded parameters (reads and writes the unit in bf16),
// and foreach_reduce's chunk_cat widens the bf16 gradients into the reduce-scatter input (reads 2, writes the
// reduce dtype's bytes per element), each a handful of kernels (_fsdp_collectives.py).
step_ops micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                         const trained_share& trained) {
  step_ops ops = hf_profile().micro_batch_ops(m, run, layout, trained);
  const fsdp2_units u = fsdp2_unit_sizes(describe_model(m), run.data_parallel());
  const double param = static_cast<double>(dtype_bytes(layout.weights));
  const double orig = static_cast<double>(dtype_bytes(layout.master.value_or(layout.weights)));
  const double reduce = static_cast<double>(dtype_bytes(layout.optimizer_grad_dtype()));
  const double L = static_cast<double>(m.layers);
  auto unit_copies = [&](const fsdp2_unit& unit, double gathers) {
    const double padded = static_cast<double>(unit.padded_elements()), shard = static_cast<double>(unit.shard_elements);
    const double gather_bytes = shard * (orig + param) + 2 * padded * param;
    return gathers * gather_bytes + padded * (param + reduce);
  };
  // Layers are gathered twice a micro-batch (forward, and again for backward), the embedding twice, the head
  // once (kept from forward to backward).
  // (Per micro-batch: list_step_ops repeats them for the accumulation.)
  const double bytes = L * unit_copies(u.layer, 2) + unit_copies(u.embedding, 2) + unit_copies(u.head, 1);
  const double forward_kernels = (L + 1) * 2 + 2, kernels = (L + 1) * (2 * 2 + 2) + (2 + 2);
  step_op& op = ops.ops.emplace_back();
  op.name = "fsdp.copies";
  op.cls = op_class::elementwise;
  op.bytes = bytes;
  op.kernels = kernels;
  op.forward_share = 0.4f;  // of the 5 passes over each unit, the forward's all-gather is 2
  ops.launches.forward += forward_kernels;
  ops.launches.backward += kernels - forward_kernels;
  return ops;
}

void describe(const model_spec& m, const run_config& run, const precision_layout& layout, std::vector<std::string>& lines) {
  const fsdp2_units u = fsdp2_unit_sizes(describe_model(m), run.data_parallel());
  lines.push_back(fmt::format(
      "FSDP2 units: each decoder layer ({:.2f} M parameters), the embedding, and [final norm, head] (kept unsharded from "
      "forward to backward); parameters sharded in {} over {} ranks, gathered in {}; gradients reduced in {} "
      "(torchtitan reduces in fp32: --grad-dtype fp32)",
      static_cast<double>(u.layer.elements) / 1e6, dtype_name(layout.master.value_or(layout.weights)), run.data_parallel(),
      dtype_name(layout.weights), dtype_name(layout.optimizer_grad_dtype())));
  hf_profile().describe(m, run, layout, lines);
  if (std::string selective = hf_selective_checkpoint_line(run); !selective.empty()) lines.push_back(std::move(selective));
}

std::string overhead_note(const calibration& calib) { return hf_profile().overhead_note(calib); }

}  // namespace

const stack_profile& fsdp2_profile() {
  static const stack_profile profile{
      .name = "fsdp2",
      .title = "PyTorch FSDP2 (fully_shard) + Hugging Face transformers",
      .assumption = "framework fsdp2: PyTorch FSDP2 (fully_shard, torch 2.11) over Hugging Face transformers' modules, "
                    "wrapped as torchtitan and Accelerate wrap a decoder: a unit per layer, each all-gathered before its "
                    "forward and again, one unit ahead, for its backward; its gradients reduce-scattered after its "
                    "backward; the activations a 16-bit model's modules save",
      .default_precision = default_precision,
      .default_recompute = recompute_mode::none,
      .recompute_help = "under --framework fsdp2 selective is torchtitan's per-op policy (every second matmul of a "
                        "layer and its pointwise ops recomputed)",
      .offers_selective_recompute = true,  // torchtitan's per-op policy over each decoder layer
      .runs_model_dropout = true,
      .check = check,
      .offers_optimizer_impl = true,
      .offers_expandable_segments = true,
      .lora_through_peft = false,
      .hugging_face_modules = true,
      .traits = fsdp2_traits,
      .build_inventory = build,
      .allocator = allocator_model::pytorch_replay,
      .overhead = overhead,
      .slack_fraction = slack,
      .micro_batch_ops = micro_batch_ops,
      .grads_per_parameter = false,
      .communication = fsdp2_communication,
      .describe = describe,
      .overhead_note = overhead_note,
      .calibration_keys = {},
      .calibrated_as = hf_profile,
      .default_zero = 3,
  };
  return profile;
}

}  // namespace trainplan
