#include "planner/model_spec.hpp"

#include <fmt/format.h>

#include "planner/input_error.hpp"

namespace trainplan {

std::string_view family_name(model_family f) { return f == model_family::gpt ? "gpt" : "llama"; }

model_family parse_family(std::string_view text) {
  if (text == "gpt") return model_family::gpt;
  if (text == "llama") return model_family::llama;
  throw input_error(fmt::format("--family: unknown family '{}' (known: gpt, llama)", text));
}

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
                          {m.head_dim, "head_dim"}, {m.ffn, "ffn"}, {m.vocab, "vocab"}}) {
    if (v > max_dim)
      throw input_error(fmt::format("model {}: {} = {} is beyond any real model (limit {})", m.name, field, v, max_dim));
  }
  if (m.dropout < 0.0 || m.dropout >= 1.0)
    throw input_error(fmt::format("model {}: dropout must be at least 0 and below 1", m.name));
}

}  // namespace trainplan
