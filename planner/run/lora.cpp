// LoRA's adapted modules and their parameters (lora.hpp): each target named as peft names it in each family
// (fused q/k/v and gate/up included), lora_A (r, in) and lora_B (out, r), and QLoRA's NF4 bytes.
#include "planner/run/lora.hpp"

#include "planner/util/checked_math.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

std::vector<lora_module> lora_layer_modules(const model_spec& m, unsigned targets, const stack_traits& stack) {
  const std::uint64_t h = m.hidden, hq = m.q_width(), kv = m.kv_width(), f = m.ffn;
  const bool fused = m.fused_projections && stack.keeps_fused_projections;
  std::vector<lora_module> out;
  if (m.is_mla()) {
    // Multi-head latent attention (peft target names of DeepseekV3Attention): q means q_a_proj and q_b_proj
    // (or q_proj), k kv_a_proj_with_mqa and v kv_b_proj, o o_proj.
    const std::uint64_t kv_up = m.heads * (m.head_dim - m.rope_head_dim + m.v_dim());
    if (targets & lora_q) {
      if (m.q_lora_rank > 0) out.insert(out.end(), {{h, m.q_lora_rank}, {m.q_lora_rank, hq}});
      else out.push_back({h, hq});
    }
    if (targets & lora_k) out.push_back({h, m.kv_lora_rank + m.rope_head_dim});
    if (targets & lora_v) out.push_back({m.kv_lora_rank, kv_up});
    if (targets & lora_o) out.push_back({m.out_width(), h});
  } else if (m.family == model_family::gpt || fused) {
    // GPT-2 fuses q, k and v into c_attn (Phi-3 into qkv_proj): naming any of them adapts that one module,
    // out = q + k + v.
    if (targets & (lora_q | lora_k | lora_v)) out.push_back({h, m.qkv_width()});
    if (targets & lora_o) out.push_back({hq, h});
  } else {
    if (targets & lora_q) out.push_back({h, hq});
    if (targets & lora_k) out.push_back({h, kv});
    if (targets & lora_v) out.push_back({h, kv});
    if (targets & lora_o) out.push_back({hq, h});
  }
  if (targets & lora_mlp) {
    if (m.family == model_family::gpt) out.insert(out.end(), {{h, f}, {f, h}});  // c_fc, c_proj
    else if (fused) out.insert(out.end(), {{h, 2 * f}, {f, h}});                // gate_up_proj, down_proj
    else out.insert(out.end(), {{h, f}, {h, f}, {f, h}});                        // gate, up, down
  }
  return out;
}

std::uint64_t lora_params(const model_spec& m, std::uint64_t rank, unsigned targets, const stack_traits& stack) {
  std::uint64_t per_layer = 0;  // sum of (in + out) over targeted layers
  for (const lora_module& mod : lora_layer_modules(m, targets, stack))
    per_layer = checked_add(per_layer, checked_add(mod.in, mod.out, "LoRA parameter count"), "LoRA parameter count");
  return checked_product({per_layer, rank, m.layers}, "LoRA parameter count");
}

std::vector<std::uint64_t> lora_layer_tensors(const model_spec& m, std::uint64_t rank, unsigned targets,
                                              const stack_traits& stack) {
  std::vector<std::uint64_t> out;
  for (const lora_module& mod : lora_layer_modules(m, targets, stack)) {
    out.push_back(checked_mul(rank, mod.in, "LoRA parameter count"));   // lora_A: (r, in)
    out.push_back(checked_mul(mod.out, rank, "LoRA parameter count"));  // lora_B: (out, r)
  }
  return out;
}

unsigned lora_qkv_modules(const model_spec& m, unsigned targets, const stack_traits& stack) {
  return static_cast<unsigned>(lora_layer_modules(m, targets & (lora_q | lora_k | lora_v), stack).size());
}

unsigned lora_linears(const model_spec& m, unsigned targets, const stack_traits& stack) {
  return static_cast<unsigned>(lora_layer_modules(m, targets, stack).size());
}

std::uint64_t nf4_bytes(std::uint64_t n) {
  const std::uint64_t blocks = (n + 63) / 64;
  return (n + 1) / 2 + blocks + 4 * ((blocks + 255) / 256);
}

}  // namespace trainplan
