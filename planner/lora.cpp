#include "planner/lora.hpp"

#include "planner/checked_math.hpp"
#include "planner/run_config.hpp"

namespace trainplan {

std::uint64_t lora_params(const model_spec& m, std::uint64_t rank, unsigned targets) {
  const std::uint64_t h = m.hidden, hq = m.q_width(), kv = m.kv_width(), f = m.ffn;
  std::uint64_t per_layer = 0;  // sum of (in + out) over targeted layers
  if (targets & lora_q) per_layer += h + hq;
  if (targets & lora_k) per_layer += h + kv;
  if (targets & lora_v) per_layer += h + kv;
  if (targets & lora_o) per_layer += hq + h;
  if (targets & lora_mlp) per_layer += m.family == model_family::gpt ? 2 * (h + f) : 3 * (h + f);  // fc, proj | gate, up, down
  return checked_product({per_layer, rank, m.layers}, "LoRA parameter count");
}

unsigned lora_linears(const model_spec& m, unsigned targets) {
  unsigned n = 0;
  for (unsigned t : {lora_q, lora_k, lora_v, lora_o})
    if (targets & t) ++n;
  if (targets & lora_mlp) n += m.family == model_family::gpt ? 2 : 3;
  return n;
}

std::uint64_t nf4_bytes(std::uint64_t n) {
  const std::uint64_t blocks = (n + 63) / 64;
  return (n + 1) / 2 + blocks + 4 * ((blocks + 255) / 256);
}

}  // namespace trainplan
