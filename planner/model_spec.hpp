#pragma once
// The shape of a decoder-only transformer, for the two families the planner models.
#include <cstdint>
#include <string>
#include <string_view>

namespace trainplan {

// gpt: GPT-2/GPT-3. LayerNorm with bias, GELU MLP of width ffn (4h), biases on every linear layer,
//      learned position embeddings (max_positions rows), tied input/output embeddings.
// llama: RMSNorm, SwiGLU MLP (gate, up, down) of width ffn, grouped-query attention (kv_heads), RoPE
//      (no position parameters), no biases (qkv_bias for Qwen2-style models), tied or untied embeddings.
enum class model_family { gpt, llama };

std::string_view family_name(model_family f);
model_family parse_family(std::string_view text);  // throws input_error

struct model_spec {
  std::string name = "custom";   // preset name, "hf:<path>", "derived" or "custom"
  model_family family = model_family::llama;
  std::uint64_t layers = 0;
  std::uint64_t hidden = 0;
  std::uint64_t heads = 0;
  std::uint64_t kv_heads = 0;
  std::uint64_t head_dim = 0;       // hidden / heads unless a config says otherwise
  std::uint64_t ffn = 0;            // MLP inner width
  std::uint64_t vocab = 0;
  std::uint64_t max_positions = 0;  // rows of the learned position table; 0 with RoPE
  bool tied_embeddings = false;
  bool qkv_bias = false;            // llama family only: q/k/v projections carry biases (Qwen2)
  double dropout = 0.0;             // the model's default dropout probability
  std::string source;

  std::uint64_t q_width() const { return heads * head_dim; }        // (h) for standard attention
  std::uint64_t kv_width() const { return kv_heads * head_dim; }    // (kv_heads * head_dim)
  std::uint64_t qkv_width() const { return q_width() + 2 * kv_width(); }
};

// Rejects shapes no model can have: zero sizes, heads that do not divide the hidden size (when head_dim
// was derived), kv_heads that do not divide heads. Throws input_error naming the field.
void validate_model(const model_spec& m);

}  // namespace trainplan
