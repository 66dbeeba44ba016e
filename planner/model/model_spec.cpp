// The model's shape (model_spec.hpp): family and gate names, the layers a sliding window covers, and the checks
// that refuse a shape no real model has (Gemma 2's, MoE's and DeepSeek's options included).
#include "planner/model/model_spec.hpp"

#include <fmt/format.h>

#include <cmath>

#include "planner/util/input_error.hpp"

namespace trainplan {

std::string_view family_name(model_family f) { return f == model_family::gpt ? "gpt" : "llama"; }

model_family parse_family(std::string_view text) {
  if (text == "gpt") return model_family::gpt;
  if (text == "llama") return model_family::llama;
  throw input_error(fmt::format("--family: unknown family '{}' (known: gpt, llama)", text));
}

std::string_view gate_activation_name(gate_activation g) { return g == gate_activation::silu ? "silu" : "gelu_tanh"; }

gate_activation parse_gate_activation(std::string_view text) {
  if (text == "silu") return gate_activation::silu;
  if (text == "gelu_tanh") return gate_activation::gelu_tanh;
  throw input_error(fmt::format("unknown MLP gate activation '{}' (known: silu, gelu_tanh)", text));
}

std::uint64_t model_spec::sliding_layers() const {
  if (sliding_window_tokens == 0) return 0;
  if (sliding_window_global_every == 0) return layers;
  return layers - layers / sliding_window_global_every;  // one global layer closes each full group of N
}

namespace {

// The Gemma 2 fields: sandwich norms and GeGLU exist only on the llama family's RMSNorm/gated-MLP block;
// soft caps and sliding windows are attention and head options any family could have.
void validate_gemma_features(const model_spec& m) {
  if (m.norms_per_layer != 2 && m.norms_per_layer != 4)
    throw input_error(fmt::format("model {}: norms_per_layer must be 2 (pre-norm) or 4 (pre- and post-norm), not {}",
                                  m.name, m.norms_per_layer));
  if (m.family == model_family::gpt) {
    if (m.norms_per_layer != 2)
      throw input_error(fmt::format("model {}: the gpt family has 2 LayerNorms per layer, not {}", m.name, m.norms_per_layer));
    if (m.mlp_gate != gate_activation::silu)
      throw input_error(fmt::format("model {}: the gpt family's MLP has no gate (mlp_gate {})", m.name,
                                    gate_activation_name(m.mlp_gate)));
    if (m.embed_scale_sqrt_hidden)
      throw input_error(fmt::format("model {}: embed_scale_sqrt_hidden is a llama-family (Gemma) option", m.name));
  }
  for (auto [cap, field] : {std::pair{m.attn_logit_softcap, "attn_logit_softcap"}, {m.final_logit_softcap, "final_logit_softcap"}}) {
    if (!std::isfinite(cap) || cap < 0.0)
      throw input_error(fmt::format("model {}: {} must be a finite number, at least 0 (0: no soft cap)", m.name, field));
  }
  if (m.sliding_window_global_every != 0 && m.sliding_window_tokens == 0)
    throw input_error(fmt::format("model {}: sliding_window_global_every needs a sliding window (sliding_window_tokens)", m.name));
  if (m.sliding_window_global_every > m.layers)
    throw input_error(fmt::format("model {}: sliding_window_global_every ({}) is more than the {} layers", m.name,
                                  m.sliding_window_global_every, m.layers));
}

// Mixture of Experts: a router needs at least one expert per token and no more than it has.
void validate_moe(const model_spec& m) {
  if (!m.is_moe()) {
    if (m.experts_per_token != 0 || m.shared_expert_ffn != 0)
      throw input_error(fmt::format("model {}: experts_per_token and shared_expert_ffn need experts", m.name));
    return;
  }
  if (m.family != model_family::llama)
    throw input_error(fmt::format("model {}: experts exist for the llama family's gated MLP only", m.name));
  if (m.experts_per_token == 0 || m.experts_per_token > m.experts)
    throw input_error(fmt::format("model {}: experts_per_token must be 1 to experts ({}), not {}", m.name, m.experts,
                                  m.experts_per_token));
  if (m.dense_layers >= m.layers)
    throw input_error(fmt::format("model {}: dense_layers ({}) must leave at least one of the {} layers with experts",
                                  m.name, m.dense_layers, m.layers));
}

// DeepSeek's dense first layers and ungated shared experts need experts; multi-head latent attention is a
// llama-family attention whose every head has its own keys and values (after decompression).
void validate_deepseek_features(const model_spec& m) {
  if (!m.is_moe() && (m.dense_layers != 0 || m.dense_ffn != 0))
    throw input_error(fmt::format("model {}: dense_layers and dense_ffn describe the dense layers before the experts; "
                                  "the model has no experts", m.name));
  if (m.dense_ffn != 0 && m.dense_layers == 0)
    throw input_error(fmt::format("model {}: dense_ffn needs dense_layers", m.name));
  if (m.router_score_bias && !m.is_moe())
    throw input_error(fmt::format("model {}: router_score_bias is a bias on the experts' routing scores; the model has no experts", m.name));
  if (!m.shared_expert_gate && m.shared_expert_ffn == 0)
    throw input_error(fmt::format("model {}: shared_expert_gate describes a shared expert (shared_expert_ffn)", m.name));
  if (!m.is_mla()) {
    if (m.q_lora_rank != 0 || m.rope_head_dim != 0)
      throw input_error(fmt::format("model {}: q_lora_rank and rope_head_dim belong to multi-head latent attention "
                                    "(kv_lora_rank)", m.name));
    return;
  }
  if (m.family != model_family::llama)
    throw input_error(fmt::format("model {}: multi-head latent attention exists for the llama family only", m.name));
  // A latent is a compression of the hidden state (DeepSeek-V3: 512 and 1536 of 7168).
  if (m.kv_lora_rank > m.hidden || m.q_lora_rank > m.hidden)
    throw input_error(fmt::format("model {}: kv_lora_rank ({}) and q_lora_rank ({}) must not exceed hidden ({}): "
                                  "multi-head latent attention compresses the hidden state", m.name, m.kv_lora_rank,
                                  m.q_lora_rank, m.hidden));
  if (m.kv_heads != m.heads)
    throw input_error(fmt::format("model {}: multi-head latent attention gives every head its keys and values "
                                  "(kv_heads {} != heads {})", m.name, m.kv_heads, m.heads));
  if (m.rope_head_dim == 0 || m.rope_head_dim >= m.head_dim)
    throw input_error(fmt::format("model {}: rope_head_dim must be at least 1 and below head_dim ({}), not {}", m.name,
                                  m.head_dim, m.rope_head_dim));
}

}  // namespace

void validate_model(const model_spec& m) {
  auto require = [&](std::uint64_t v, const char* field) {
    if (v == 0) throw input_error(fmt::format("model {}: {} must be at least 1", m.name, field));
  };
  require(m.layers, "layers");
  require(m.hidden, "hidden");
  require(m.heads, "heads");
  require(m.kv_heads, "kv_heads");
  require(m.head_dim, "head_dim");
  require(m.ffn, "ffn");
  require(m.vocab, "vocab");
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    throw input_error(fmt::format("model {}: kv_heads ({}) must divide heads ({})", m.name, m.kv_heads, m.heads));
  if (m.family == model_family::gpt) {
    if (m.kv_heads != m.heads)
      throw input_error(fmt::format("model {}: the gpt family has no grouped-query attention (kv_heads {} != heads {})",
                                    m.name, m.kv_heads, m.heads));
    if (m.q_width() != m.hidden)
      throw input_error(fmt::format("model {}: heads ({}) x head_dim ({}) must equal hidden ({}) in the gpt family",
                                    m.name, m.heads, m.head_dim, m.hidden));
  }
  // Sizes beyond any real model are almost always a typo, and they would make later products overflow.
  constexpr std::uint64_t max_dim = 1ull << 24;
  for (auto [v, field] : {std::pair{m.layers, "layers"}, {m.hidden, "hidden"}, {m.heads, "heads"},
                          {m.head_dim, "head_dim"}, {m.ffn, "ffn"}, {m.vocab, "vocab"},
                          {m.sliding_window_tokens, "sliding_window_tokens"}, {m.experts, "experts"},
                          {m.shared_expert_ffn, "shared_expert_ffn"}, {m.dense_ffn, "dense_ffn"},
                          {m.kv_lora_rank, "kv_lora_rank"}, {m.q_lora_rank, "q_lora_rank"},
                          {m.v_head_dim, "v_head_dim"}, {m.max_positions, "max_positions"}}) {
    if (v > max_dim)
      throw input_error(fmt::format("model {}: {} = {} is beyond any real model (limit {})", m.name, field, v, max_dim));
  }
  if (m.dropout < 0.0 || m.dropout >= 1.0)
    throw input_error(fmt::format("model {}: dropout must be at least 0 and below 1", m.name));
  validate_gemma_features(m);
  validate_moe(m);
  validate_deepseek_features(m);
}

}  // namespace trainplan
