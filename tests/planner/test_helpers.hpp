#pragma once
// Small builders shared by the planner tests.
#include "planner/catalog.hpp"
#include "planner/model_spec.hpp"
#include "planner/run_config.hpp"

namespace trainplan::test {

inline const catalog& data() {
  static const catalog c = catalog::load();
  return c;
}

// A GPT-3-style shape (f = 4h, MHA, biases) of any size, for checking closed forms.
inline model_spec gpt_shape(std::uint64_t layers, std::uint64_t hidden, std::uint64_t heads, std::uint64_t vocab = 1000) {
  model_spec m;
  m.name = "test-gpt";
  m.family = model_family::gpt;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = m.kv_heads = heads;
  m.head_dim = hidden / heads;
  m.ffn = 4 * hidden;
  m.vocab = vocab;
  m.max_positions = 0;
  m.tied_embeddings = true;
  m.dropout = 0.1;
  return m;
}

inline run_config run_of(std::uint64_t seq, std::uint64_t micro_batch, recompute_mode rc, attention_kind att,
                         double dropout) {
  run_config r;
  r.seq = seq;
  r.micro_batch = micro_batch;
  r.recompute = rc;
  r.attention = att;
  r.dropout = dropout;
  return r;
}

}  // namespace trainplan::test
