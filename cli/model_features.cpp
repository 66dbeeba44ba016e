// The model's options beyond its family's plain block, in words (model_features.hpp): MoE, latent attention,
// norms, gates, scales, soft caps, sliding windows.
#include "cli/model_features.hpp"

#include <fmt/format.h>

#include <vector>

namespace trainplan::cli {

std::string model_features_text(const model_spec& m) {
  std::vector<std::string> parts;
  if (m.is_moe())
    parts.push_back(fmt::format("{} experts, top-{}{}{}", m.experts, m.experts_per_token,
                                m.shared_expert_ffn ? fmt::format(", a shared expert of width {}{}", m.shared_expert_ffn,
                                                                  m.shared_expert_gate ? "" : " (ungated)")
                                                    : "",
                                m.dense_layers ? fmt::format(", {} dense first layers of width {}", m.dense_layers,
                                                             m.dense_mlp_width())
                                               : ""));
  if (m.is_mla())
    parts.push_back(fmt::format("latent attention (kv rank {}{}, RoPE dim {}, v dim {})", m.kv_lora_rank,
                                m.q_lora_rank ? fmt::format(", q rank {}", m.q_lora_rank) : "", m.rope_head_dim, m.v_dim()));
  if (m.qk_norm) parts.push_back("q/k norms");
  if (m.norms_per_layer != 2) parts.push_back(fmt::format("{} norms/layer", m.norms_per_layer));
  if (m.mlp_gate == gate_activation::gelu_tanh) parts.push_back("GeGLU");
  if (m.embed_scale_sqrt_hidden) parts.push_back("embeddings x sqrt(h)");
  if (m.attn_logit_softcap > 0) parts.push_back(fmt::format("attention soft cap {:g}", m.attn_logit_softcap));
  if (m.final_logit_softcap > 0) parts.push_back(fmt::format("logit soft cap {:g}", m.final_logit_softcap));
  if (m.sliding_window_tokens > 0)
    parts.push_back(fmt::format("window {} on {} of {} layers", m.sliding_window_tokens, m.sliding_layers(), m.layers));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace trainplan::cli
