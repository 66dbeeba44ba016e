// torchtune's registration (torchtune_profile.hpp). Sources: torchtune's recipes/full_finetune_single_device.py
// (the model built in the configured dtype, `del logits` after the loss, loss.backward(), optimizer.step(),
// zero_grad(set_to_none=True)), torchtune/modules/attention.py (MultiHeadAttention.forward), transformer.py
// (TransformerDecoder: self.output(h).float(), chunked_output), rms_norm.py, feed_forward.py and
// position_embeddings.py, training/_compile.py (compile_model, compile_loss) and
// training/_activation_checkpointing.py (set_activation_checkpointing over each TransformerSelfAttentionLayer).
#include "planner/profiles/torchtune/torchtune_profile.hpp"

#include <fmt/format.h>

#include "planner/memory/inventory_builder.hpp"
#include "planner/memory/model_state.hpp"
#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/profiles/hf/hf_compile.hpp"
#include "planner/profiles/hf/hf_layer_ops.hpp"
#include "planner/profiles/hf/hf_loss_chunks.hpp"
#include "planner/profiles/hf/hf_profile.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/profiles/hf/hf_traits.hpp"
#include "planner/profiles/step_frame.hpp"
#include "planner/run/packing.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

// torchtune's decoder against transformers' Llama, module by module: RMSNorm upcasts to fp32, normalises by rsqrt of
// the mean square and casts back before the scale (rms_norm.py, as LlamaRMSNorm); FeedForward is w2(silu(w1(x)) *
// w3(x)) (as LlamaMLP's down(act(gate(x)) * up(x))); the decoder layer adds each sublayer's output to the residual
// stream (TransformerSelfAttentionLayer); SDPA with is_causal. So its layers save what the rows of
// planner/profiles/hf/ save for transformers' Llama, but for its attention, which expands k and v itself, and its
// output, which it upcasts itself.
constexpr stack_traits torchtune_traits = [] {
  stack_traits t = hf_traits;
  t.keeps_fused_projections = false;  // its Phi-3 splits qkv_proj at load (refused below: not modelled)
  t.expands_kv_heads = true;
  t.model_upcasts_logits = true;
  return t;
}();

// training.compile_model compiles each TransformerSelfAttentionLayer apart and compile_loss the loss module
// (torchtune/training/_compile.py): its only scope.
constexpr compile_scope compile_scopes[] = {compile_scope::layers_and_loss};

// CEWithChunkedOutputLoss is torchtune's own (torchtune/modules/loss/), its configs' default loss.
constexpr loss_kind own_losses[] = {loss_kind::chunked};

// Its configs' `dtype: bf16`: the model built in bf16, the optimizer's state in the parameters' dtype.
precision_regime default_precision(bool) { return precision_regime::bf16; }

void check(const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (run.data_parallel() > 1 || run.tp > 1 || run.pp > 1 || run.ep > 1)
    throw input_error("--framework torchtune models its single-device recipe (full_finetune_single_device): one GPU "
                      "(its distributed recipes shard with FSDP2's fully_shard)");
  if (run.finetune != finetune_kind::full)
    throw input_error("--framework torchtune models full fine-tuning: its LoRALinear (lora_finetune_single_device) "
                      "is not peft's and is not modelled");
  if (layout.regime != precision_regime::bf16 && layout.regime != precision_regime::fp32)
    throw input_error(fmt::format("--framework torchtune trains in the model's dtype (its `dtype: bf16 | fp32`, no "
                                  "autocast): --precision bf16 or fp32, not {}", precision_name(layout.regime)));
  if (run.recompute == recompute_mode::selective)
    throw input_error("--framework torchtune's single-device recipe checkpoints whole decoder layers "
                      "(enable_activation_checkpointing): --recompute none or full");
  if (m.family != model_family::llama || m.is_moe() || m.is_mla() || m.fused_projections || m.norms_per_layer != 2 ||
      m.attn_logit_softcap > 0 || m.final_logit_softcap > 0)
    throw input_error(fmt::format("--framework torchtune models its dense Llama-family decoder (separate q, k, v "
                                  "projections, two RMSNorms a layer, no soft caps); {} is not modelled under it",
                                  m.name));
  if (hf_sliding_window_mask(m, run))
    throw input_error(fmt::format("--framework torchtune: {}'s sliding window of {} tokens (torchtune's attention "
                                  "attends to the whole sequence) is not modelled at --seq {}",
                                  m.name, m.sliding_window_tokens, run.seq));
  if (run.attention != attention_kind::flash)
    throw input_error("--framework torchtune runs PyTorch's SDPA (its _sdpa_or_flex_attention): --attention sdpa (or "
                      "flash), not eager or flash_attention_2");
  if (packs_documents(run))
    throw input_error("--framework torchtune: packed documents run flex attention with a block mask, which is not "
                      "modelled (no --packing)");
  if (run.loss == loss_kind::fused_linear)
    throw input_error("--framework torchtune: Liger's fused linear cross-entropy is not torchtune's loss: --loss "
                      "standard or chunked (CEWithChunkedOutputLoss)");
  if (run.dropout > 0)
    throw input_error("--framework torchtune: its Llama builders set attn_dropout 0 and have no other dropout (give "
                      "--dropout 0)");
  if (run.offload != offload_mode::none)
    throw input_error("--framework torchtune: activation and optimizer offloading are not modelled");
  check_hf_loss("torchtune", run);
  check_hf_compile("torchtune", m, run, layout);
}

inventory build(const model_spec& m, const run_config& run, const precision_layout& layout, const model_facts& facts,
                const pipeline_stage& stage) {
  inventory out;
  out.tensors.reserve(64);
  // PyTorch's autograd makes each parameter's .grad in its backward and the recipe's zero_grad(set_to_none=True)
  // frees them; torch.optim.AdamW (foreach unless fused=True) keeps its state in the parameters' dtype.
  add_model_state(out, m, run, layout, facts, torchtune_traits, {.grads_per_parameter = true, .foreach_adamw = true});
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  inv.set_inflight(stage.inflight);
  const hf_program_order order =
      add_hf_activations(inv, m, run, layout, facts.counts, out.backward_programs, torchtune_traits);
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
  step_ops ops = micro_batch_step_ops(m, run, layout, selective_rerun::own_rows, [&](step_rows& rows) {
    add_hf_step_ops(rows.layer, rows.dense_mlp, rows.moe_mlp, rows.head, m, run, layout, torchtune_traits);
  });
  add_optimizer_op(ops, run.optimizer_impl == optimizer_impl_kind::foreach_impl ? optimizer_kernels::pytorch_foreach
                                                                                : optimizer_kernels::multi_tensor_fused,
                   trained);
  add_accumulation_ops(ops, trained.params * static_cast<double>(dtype_bytes(layout.grads)), trained.tensors);
  return ops;
}

void describe(const model_spec& m, const run_config& run, const precision_layout& layout, std::vector<std::string>& lines) {
  lines.push_back(fmt::format(
      "attention: {} with k and v expanded to every query head before it (MultiHeadAttention: view, expand, reshape), "
      "so each layer saves q-wide keys and values; the model returns fp32 logits (self.output(h).float(), not with "
      "the chunked loss), deleted after the loss; AdamW {}{}",
      hf_sdpa_kernel_name(hf_sdpa_backend(m, run, layout, torchtune_traits), run), optimizer_impl_name(run.optimizer_impl),
      run.expandable_segments ? "; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (simulated, not yet measured)" : ""));
  if (std::string loss = hf_loss_line(m, run); !loss.empty()) lines.push_back(std::move(loss));
  if (std::string compiled = hf_compile_line(run, torchtune_traits); !compiled.empty()) lines.push_back(std::move(compiled));
  else
    lines.push_back("eager: the forward's temporaries within a layer are transformers' (torchtune's RoPE computes in "
                    "fp32, larger temporaries that live only inside each layer's forward, not itemised)");
}

std::string overhead_note(const calibration& calib) { return hf_profile().overhead_note(calib); }

}  // namespace

const stack_profile& torchtune_profile() {
  static const stack_profile profile{
      .name = "torchtune",
      .title = "torchtune's single-device full fine-tuning recipe",
      .assumption = "framework torchtune: torchtune's single-device full fine-tuning recipe over its own decoder, in "
                    "the model's dtype (no autocast): the tensors its layers save (as transformers' Llama layers, but "
                    "keys and values expanded to every query head before SDPA), its fp32 logits deleted after the "
                    "loss, gradients appearing layer by layer, and PyTorch's caching allocator replayed; derived from "
                    "its source, checked against its published Llama-3.2-3B memory figures",
      .default_precision = default_precision,
      .default_recompute = recompute_mode::none,
      .recompute_help = "",
      .offers_selective_recompute = false,  // enable_activation_checkpointing wraps whole decoder layers
      .runs_model_dropout = false,  // its Llama builders: attn_dropout=0.0, no residual dropout
      .check = check,
      .offers_optimizer_impl = true,
      .offers_expandable_segments = true,
      .lora_through_peft = false,
      .hugging_face_modules = false,
      .traits = torchtune_traits,
      .compile_scopes = compile_scopes,
      .own_losses = own_losses,
      .build_inventory = build,
      .allocator = allocator_model::pytorch_replay,
      .overhead = overhead,
      .slack_fraction = slack,
      .micro_batch_ops = micro_batch_ops,
      .grads_per_parameter = true,
      .communication = nullptr,
      .describe = describe,
      .overhead_note = overhead_note,
      .calibration_keys = {},
      .calibrated_as = hf_profile,
      .default_zero = 0,
  };
  return profile;
}

}  // namespace trainplan
