#include "planner/profiles/hf/hf_selective_checkpoint.hpp"

#include <fmt/format.h>

#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/profiles/hf/hf_compile.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

void check_hf_selective_checkpoint(std::string_view stack, const model_spec& m, const run_config& run,
                                   const precision_layout& layout) {
  if (run.recompute != recompute_mode::selective) return;
  auto refuse = [&](std::string_view why) {
    throw input_error(fmt::format("--recompute selective under --framework {} is torchtitan's per-op policy (every "
                                  "second matmul of a layer recomputed), modelled for Llama-family layers on SDPA's "
                                  "fused kernels: not {} (--recompute full or none)",
                                  stack, why));
  };
  // GPT-2's Conv1D runs addmm, which the policy neither counts nor (in torchtitan's list of 2024) saves.
  if (m.family == model_family::gpt) refuse("GPT-2's Conv1D layers (addmm, not mm)");
  if (m.is_moe() || m.is_mla()) refuse("experts or latent attention");
  // One qkv_proj and one gate_up_proj are two of four matmuls: another set kept.
  if (m.fused_projections) refuse(fmt::format("{}'s fused qkv_proj and gate_up_proj", m.name));
  // F.linear with a bias over a [b, s, in] input runs addmm, which the policy does not count.
  if (m.qkv_bias) refuse(fmt::format("{}'s q, k and v biases (addmm, not mm)", m.name));
  // The flash-attn package's op is not in the policy's list: its attention would be recomputed.
  if (run.attention == attention_kind::flash_attention_2) refuse("the flash-attn package (--attention sdpa)");
  const sdpa_backend backend = hf_sdpa_backend(m, run, layout);
  if (backend == sdpa_backend::eager || backend == sdpa_backend::math)
    refuse(backend == sdpa_backend::eager ? "eager attention" : "SDPA's math path");
  if (compiles_layers(run)) refuse("--compile (the policy then tags the graph for the compiler's partitioner)");
  const std::string_view coarse = hf_coarse_forward_reason(m, run, layout);
  if (!coarse.empty()) refuse(fmt::format("{} (a layer's forward not written op by op)", coarse));
}

std::string hf_selective_checkpoint_line(const run_config& run) {
  if (run.recompute != recompute_mode::selective) return {};
  return "recompute selective: torchtitan's per-op policy (SelectiveAC, \"op\"): each layer checkpointed, the "
         "outputs of q_proj, v_proj, gate_proj and down_proj (the odd aten.mm calls) and of SDPA (output, "
         "log-sum-exp) kept from forward to backward beside the layer's input; k_proj, o_proj, up_proj, the norms, "
         "rotary embedding, silu and product rerun in the layer's backward";
}

}  // namespace trainplan
