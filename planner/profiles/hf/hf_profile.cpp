#include "planner/profiles/hf/hf_profile.hpp"

#include <fmt/format.h>

#include "planner/memory/inventory_builder.hpp"
#include "planner/memory/model_state.hpp"
#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/profiles/hf/hf_layer_ops.hpp"
#include "planner/profiles/hf/hf_loss_chunks.hpp"
#include "planner/profiles/hf/hf_compile.hpp"
#include "planner/profiles/hf/hf_packing.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/profiles/model_parallel_comm.hpp"
#include "planner/profiles/step_frame.hpp"
#include "planner/run/lora.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

// Hugging Face's Trainer with bf16=True runs autocast over an fp32 model; a LoRA base is loaded in bf16
// (from_pretrained(torch_dtype=bfloat16), peft's documented setup).
precision_regime default_precision(bool lora) { return lora ? precision_regime::bf16 : precision_regime::amp_bf16; }

// What the profile refuses: it models one data-parallel rank of PyTorch eager.
void check(const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (run.tp > 1 || run.pp > 1)
    throw input_error("--framework hf models one data-parallel rank of PyTorch eager: no --tp or --pp");
  if (run.recompute == recompute_mode::selective)
    throw input_error("--framework hf checkpoints whole decoder layers: --recompute none or full");
  const precision_regime p = layout.regime;
  if (p != precision_regime::fp32 && p != precision_regime::amp_bf16 && p != precision_regime::amp_fp16 &&
      p != precision_regime::bf16)
    throw input_error(fmt::format("--framework hf trains in fp32, amp-bf16, amp-fp16 or bf16, not {}",
                                  precision_name(p)));
  if (run.ep > 1 || run.capacity_factor > 0.0)
    throw input_error("--framework hf: transformers' MoE blocks loop over every expert on each GPU, dropless: no "
                      "--ep or --capacity-factor");
  check_hf_loss("hf", run);
  check_hf_attention("hf", m, layout, run);
  check_hf_packing("hf", run);
  check_hf_compile("hf", m, run, layout);
}

constexpr const stack_traits& traits = hf_traits;

// torch.compile: the whole model with its loss (the Trainer's torch_compile, what a bare --compile means), each
// decoder layer apart (accelerate's regional compilation), or each layer and the loss apart.
constexpr compile_scope compile_scopes[] = {compile_scope::model, compile_scope::layers, compile_scope::layers_and_loss};

inventory build(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts,
                const pipeline_stage& stage) {
  inventory out;
  out.tensors.reserve(64);  // one allocation per configuration: sweeps evaluate millions
  // With ZeRO (the Trainer under Accelerate's FSDP or DeepSpeed), the paper's sharding and buffers: those stacks'
  // own profiles (planner/profiles/) model theirs.
  add_model_state(out, m, run, layout, facts, traits,
                  {.grads_per_parameter = true, .peft_adapters = true, .foreach_adamw = true, .grad_scaler = true,
                   .zero3_gather_buffers = true, .ddp_bucket = run.zero > 0});
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  // PyTorch DDP (the Trainer's default on several GPUs): the Reducer allocates a flat bucket tensor for every
  // parameter that requires grad when it is built (Reducer::initialize_buckets; rebuilt once after the first
  // iteration in gradient-ready order), in the gradients' dtype; with gradient_as_bucket_view=False, the
  // default, .grad stays a tensor of its own and is copied into the bucket: a second copy of the gradients
  // for the whole run (torch/csrc/distributed/c10d/reducer.cpp).
  if (run.data_parallel() > 1 && run.zero == 0) {
    const std::uint64_t trained = run.finetune == finetune_kind::full ? facts.counts.total
                                                                      : lora_params(m, run.lora_rank, run.lora_targets, traits);
    const dtype grads = run.finetune == finetune_kind::full ? layout.grads : peft_trained_grad_dtype(run, layout);
    inv.model_state("ddp.buckets", trained, grads, tensor_category::gradients, state_lifetime::whole_run,
                    tensor_role::communication);
  }
  inv.set_inflight(stage.inflight);
  const hf_program_order order = add_hf_activations(inv, m, run, layout, facts.counts, out.backward_programs, traits);
  out.forward_in_program_order = order.forward;
  out.coarse_forward_reason = order.coarse_forward;
  out.coarse_backward_reason = order.coarse_backward;
  return finish_inventory(std::move(out), m);
}

// PyTorch keeps a cuBLAS workspace per (handle, stream) and a handle per thread: the forward's and the autograd
// engine's (aten/src/ATen/cuda/CublasHandlePool.cpp). It allocates them through its caching allocator, so
// they count in memory_allocated.
stack_overhead overhead(const calibration& calib) {
  return {calib.context_bytes("hf"), 2 * calib.cublas_workspace_bytes};
}

double slack(const calibration& calib) { return calib.slack_fraction("hf"); }

step_ops micro_batch_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                         const trained_share& trained) {
  // (hf refuses --recompute selective; the stacks that run its ops and offer it run torchtitan's per-op policy.)
  step_ops ops = micro_batch_step_ops(m, run, layout, selective_rerun::op_policy, [&](step_rows& rows) {
    add_hf_step_ops(rows.layer, rows.dense_mlp, rows.moe_mlp, rows.head, m, run, layout, traits);
  });
  add_optimizer_op(ops, run.optimizer_impl == optimizer_impl_kind::foreach_impl ? optimizer_kernels::pytorch_foreach
                                                                                : optimizer_kernels::multi_tensor_fused,
                   trained);
  const double grad_bytes = trained.params * static_cast<double>(dtype_bytes(peft_trained_grad_dtype(run, layout)));
  // Only PyTorch's fused optimizers unscale inside their kernel (_step_supports_amp_scaling).
  const bool syncs = run.optimizer_impl != optimizer_impl_kind::fused;
  if (layout.loss_scaling) add_grad_scaler(ops, trained.params, grad_bytes, trained.tensors, syncs);
  add_accumulation_ops(ops, grad_bytes, trained.tensors);
  return ops;
}

// PyTorch DDP on several GPUs (the Trainer's default): the gradients of what trains all-reduced in 25 MiB buckets,
// launched as buckets fill during the last micro-batch's backward (no_sync before it), the last one after it
// (torch/csrc/distributed/c10d/reducer.cpp); with ZeRO, the paper's collectives.
step_comm communication(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts) {
  step_comm comm;
  const bool full = run.finetune == finetune_kind::full;
  precision_layout trained = layout;
  if (!full) trained.grads = peft_trained_grad_dtype(run, layout), trained.grad_accum.reset();
  const double params = full ? static_cast<double>(facts.counts.total)
                             : static_cast<double>(lora_params(m, run.lora_rank, run.lora_targets, traits));
  add_paper_zero_comm(comm, run, trained, params, m.layers);
  return comm;
}

void describe(const model_spec& m, const run_config& run, const precision_layout& layout, std::vector<std::string>& lines) {
  lines.push_back(fmt::format("attention: {}; AdamW {}{}",
                              run.attention == attention_kind::flash_attention_2
                                  ? "the flash-attn package (attn_implementation=\"flash_attention_2\": q, k, v, the output, an "
                                    "fp32 log-sum-exp and its rng_state saved; its backward's fp32 dq accumulator)"
                                  : hf_sdpa_kernel_name(hf_sdpa_backend(m, run, layout), run),
                              optimizer_impl_name(run.optimizer_impl),
                              run.expandable_segments
                                  ? "; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (a segment of addresses a pool, "
                                    "grown by mapping 20 MiB pages, 2 MiB for small tensors: simulated from PyTorch's "
                                    "source, not yet measured)"
                                  : ""));
  if (std::string loss = hf_loss_line(m, run); !loss.empty()) lines.push_back(std::move(loss));
  if (hf_sliding_window_mask(m, run))
    lines.push_back(fmt::format("sliding window {} <= seq {}: transformers builds the mask, so k and v are repeated to "
                                "every head and SDPA's {} kernel saves the mask as a [b,1,s,s] bias in each layer",
                                m.sliding_window_tokens, run.seq, hf_sdpa_kernel_name(hf_sdpa_backend(m, run, layout), run)));
  if (std::string packing = hf_packing_line(m, run, layout); !packing.empty()) lines.push_back(std::move(packing));
  if (std::string compiled = hf_compile_line(run, traits); !compiled.empty()) lines.push_back(std::move(compiled));
  if (run.finetune == finetune_kind::lora)
    lines.push_back(fmt::format(
        "LoRA through peft: the base wrapped in its own dtype, adapters {}, with gradients and AdamW state "
        "alike, lora_dropout {:g}; each adapted linear's lora_A saves its input (a copy per module when peft casts it "
        "to the adapters' dtype or autocast to bf16, or when lora_dropout is above 0, which also keeps a bool mask "
        "per module); frozen norms "
        "and linears save nothing for their weights; without checkpointing, layer 0's input needs no gradient; "
        "under autocast the base is the fp32 model and each frozen weight is cast anew, its bf16 copy kept per "
        "layer for backward (a base loaded in bf16: --precision bf16)",
        run.lora_fp32 ? "in fp32 (get_peft_model's autocast_adapter_dtype=True; --lora-dtype model: the model's dtype)"
                      : "in the model's dtype (--lora-dtype model: the model cast after get_peft_model)",
        run.lora_dropout));
}

std::string overhead_note(const calibration&) {
  return "PyTorch's context from data/calibration.json, measured with torch 2.11 on an H100 unless calibrated; two "
         "32 MiB workspaces, PyTorch's on sm_90, one per thread that runs GEMMs";
}

}  // namespace

const stack_profile& hf_profile() {
  static const stack_profile profile{
      .name = "hf",
      .title = "PyTorch eager + Hugging Face transformers",
      .assumption =
          "framework hf: PyTorch eager + Hugging Face transformers (profile checked against torch 2.11.0, "
          "transformers 5.17.0 on an H100): every tensor autograd saves, by op (autocast keeps norms, softmax, pow "
          "and the loss in fp32; gelu_new's Python ops; RMSNorm's fp32 upcast; SwiGLU; SDPA's backend as PyTorch "
          "picks it), the loss on fp32 logits with log_softmax saved, gradients appearing layer by layer in "
          "backward, the training loop's logits freed before optimizer.step(), foreach AdamW's temporary, and "
          "PyTorch's two cuBLAS workspaces (forward and autograd threads)",
      .default_precision = default_precision,
      .default_recompute = recompute_mode::none,
      .recompute_help = "",
      .offers_selective_recompute = false,  // Hugging Face checkpoints whole decoder layers
      .runs_model_dropout = true,
      .check = check,
      .offers_optimizer_impl = true,
      .offers_expandable_segments = true,
      .lora_through_peft = true,
      .hugging_face_modules = true,
      .traits = traits,
      .compile_scopes = compile_scopes,
      .build_inventory = build,
      .allocator = allocator_model::pytorch_replay,
      .overhead = overhead,
      .slack_fraction = slack,
      .micro_batch_ops = micro_batch_ops,
      .grads_per_parameter = true,
      .communication = communication,
      .describe = describe,
      .overhead_note = overhead_note,
      .calibration_keys = {"cuda_context_bytes"},
  };
  return profile;
}

}  // namespace trainplan
