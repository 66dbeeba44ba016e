// torch.compile under --framework hf: what is modelled and the report's line (hf_compile.hpp).
#include "planner/profiles/hf/hf_compile.hpp"

#include <fmt/format.h>

#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

// What in the run the compiled rows are not written for (empty where they are).
std::string_view not_modelled(const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (m.family == model_family::gpt) return "GPT-2's block";
  if (m.is_moe()) return "a Mixture-of-Experts MLP";
  if (m.is_mla()) return "latent attention";
  if (m.fused_projections) return "fused q, k, v and gate, up projections";
  if (m.norms_per_layer != 2) return "four norms a layer";
  if (m.attn_logit_softcap > 0 || m.final_logit_softcap > 0) return "soft-capped scores or logits";
  if (layout.regime == precision_regime::fp32) return "fp32 weights without autocast";
  if (run.finetune != finetune_kind::full) return "adapters (full fine-tuning only)";
  const sdpa_backend backend = hf_sdpa_backend(m, run, layout);
  if (backend != sdpa_backend::fused && backend != sdpa_backend::efficient) return "eager attention or SDPA's math path";
  if (hf_sdpa_mask(m, run)) return "an attention mask (a sliding window, or packed documents under SDPA)";
  return {};
}

}  // namespace

void check_hf_compile(std::string_view stack, const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (!compiles_layers(run)) return;  // (which stacks offer which scopes: stack_profile::compile_scopes, check_run)
  if (const std::string_view gap = not_modelled(m, run, layout); !gap.empty())
    throw input_error(fmt::format("--compile (torch.compile) is modelled for a dense Llama-family model in --precision "
                                  "bf16 or under autocast, fully fine-tuned, on SDPA's fused kernels or flash-attn; "
                                  "not for {} (--framework {})",
                                  gap, stack));
}

std::string hf_compile_line(const run_config& run, const stack_traits& traits) {
  if (!compiles_layers(run)) return {};
  std::string_view scope;
  switch (run.compile) {
    case compile_scope::model: scope = "of the whole model, its loss included (the Trainer's torch_compile)"; break;
    case compile_scope::layers:
      scope = "of each decoder layer apart (regional compilation: accelerate's use_regional_compilation), the "
              "embedding, final norm, head and loss eager";
      break;
    default:
      scope = traits.model_upcasts_logits
                  ? "of each decoder layer and of the loss apart (torchtune's compile_model and compile_loss), the head "
                    "eager and, before a standard loss, its logits upcast to fp32 eagerly by the model"
                  : "of each decoder layer and of the loss apart, the embedding, final norm and head eager";
  }
  const std::string_view loss = !compiles_loss(run) ? ""
                                : traits.model_upcasts_logits && run.loss == loss_kind::standard
                                    ? "; the compiled loss saves the fp32 logits it is given and their logsumexp"
                                    : "; the loss's fp32 upcast is fused, its logsumexp saved, the logits' gradient "
                                      "written in their dtype";
  const std::string_view saved_kv = traits.expands_kv_heads ? "q and k rotated, v (k and v expanded to every query head)"
                                                             : "q and k rotated, v";
  return fmt::format(
      "torch.compile (--compile {}) {}, derived from its min-cut partitioner's rules and unchecked (no compiled run "
      "measured): each layer saves its input, the residual sum, the norms' rsqrt and outputs, {}, "
      "SDPA's output and log-sum-exp, gate's, up's and their product, and under autocast the weights' casts (what a "
      "GEMM reads in the backward is never recomputed); fused kernels write no pointwise intermediates (RMSNorm's "
      "fp32 upcast, RoPE's steps, silu){}. Checked against torchtune's published compiled Llama-3.2-3B runs, "
      "through torchtune's own modules (docs/accuracy.md)",
      compile_scope_name(run.compile), scope, saved_kv, loss);
}

}  // namespace trainplan
