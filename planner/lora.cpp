#include "planner/lora.hpp"

#include "planner/checked_math.hpp"
#include "planner/run_config.hpp"

namespace trainplan {

std::uint64_t lora_params(const model_spec& m, std::uint64_t rank, unsigned targets, framework_kind framework) {
  const std::uint64_t h = m.hidden, hq = m.q_width(), kv = m.kv_width(), f = m.ffn;
  const bool fused = m.fused_projections && framework == framework_kind::hf;
  std::uint64_t per_layer = 0;  // sum of (in + out) over targeted layers
  if (m.is_mla()) {
    // Multi-head latent attention (peft target names of DeepseekV3Attention): q means q_a_proj and q_b_proj
    // (or q_proj), k kv_a_proj_with_mqa and v kv_b_proj, o o_proj.
    const std::uint64_t kv_up = m.heads * (m.head_dim - m.rope_head_dim + m.v_dim());
    if (targets & lora_q) per_layer += m.q_lora_rank > 0 ? (h + m.q_lora_rank) + (m.q_lora_rank + hq) : h + hq;
    if (targets & lora_k) per_layer += h + m.kv_lora_rank + m.rope_head_dim;
    if (targets & lora_v) per_layer += m.kv_lora_rank + kv_up;
    if (targets & lora_o) per_layer += m.out_width() + h;
  } else if (m.family == model_family::gpt || fused) {
    // GPT-2 fuses q, k and v into c_attn (Phi-3 into qkv_proj): naming any of them adapts that one module,
    // out = q + k + v.
    if (targets & (lora_q | lora_k | lora_v)) per_layer += h + m.qkv_width();
    if (targets & lora_o) per_layer += hq + h;
  } else {
    if (targets & lora_q) per_layer += h + hq;
    if (targets & lora_k) per_layer += h + kv;
    if (targets & lora_v) per_layer += h + kv;
    if (targets & lora_o) per_layer += hq + h;
  }
  if (targets & lora_mlp) {
    if (m.family == model_family::gpt) per_layer += 2 * (h + f);  // c_fc, c_proj
    else if (fused) per_layer += (h + 2 * f) + (f + h);  // gate_up_proj, down_proj
    else per_layer += 3 * (h + f);  // gate, up, down
  }
  return checked_product({per_layer, rank, m.layers}, "LoRA parameter count");
}

unsigned lora_linears(const model_spec& m, unsigned targets, framework_kind framework) {
  unsigned n = 0;
  for (unsigned t : {lora_q, lora_k, lora_v, lora_o})
    if (targets & t) ++n;
  // GPT-2's c_attn (Phi-3's qkv_proj) is one module for q, k and v.
  const bool fused = m.family == model_family::gpt || (m.fused_projections && framework == framework_kind::hf);
  if (fused && (targets & (lora_q | lora_k | lora_v))) n = 1 + ((targets & lora_o) ? 1 : 0);
  if (m.is_mla() && m.q_lora_rank > 0 && (targets & lora_q)) ++n;  // q_a_proj and q_b_proj
  if (targets & lora_mlp) n += fused ? 2 : 3;  // c_fc, c_proj | gate_up_proj, down_proj | gate, up, down
  return n;
}

std::uint64_t nf4_bytes(std::uint64_t n) {
  const std::uint64_t blocks = (n + 63) / 64;
  return (n + 1) / 2 + blocks + 4 * ((blocks + 255) / 256);
}

}  // namespace trainplan
