#pragma once
// Small builders shared by the planner tests.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "planner/io/catalog.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan::test {

// The first buffer of an inventory with this name ("layer{}.attn.q"), or nullptr.
inline const tensor_spec* tensor_named(const inventory& inv, std::string_view name) {
  for (const tensor_spec& t : inv.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// One layer's tensors kept from its forward to its backward (saved activations, not momentary): name -> bytes.
inline std::map<std::string, std::uint64_t> saved_per_layer(const inventory& inv) {
  std::map<std::string, std::uint64_t> saved;
  for (const tensor_spec& t : inv.tensors)
    if (t.per_layer && t.kept_to_backward && t.category == tensor_category::activations && !t.momentary)
      saved[std::string(t.name)] += t.bytes;
  return saved;
}

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

// The tiny shapes the harness tests run: 2 layers, h 32, 4 heads; llama with 2 kv heads, SwiGLU 96,
// untied, no dropout; gpt with dropout 0.1 and 64 learned positions.
inline model_spec tiny_model(model_family family, std::uint64_t vocab = 64) {
  model_spec m = gpt_shape(2, 32, 4, vocab);
  m.max_positions = 64;
  if (family == model_family::llama) {
    m.family = family;
    m.kv_heads = 2;
    m.ffn = 96;
    m.tied_embeddings = false;
    m.max_positions = 0;
    m.dropout = 0.0;
  }
  return m;
}

// The tiny Mixture of Experts the harness tests run: the tiny llama with 4 experts of SwiGLU width 16, top-2.
inline model_spec tiny_moe_model(std::uint64_t vocab = 64) {
  model_spec m = tiny_model(model_family::llama, vocab);
  m.name = "test-moe";
  m.ffn = 16;
  m.experts = 4;
  m.experts_per_token = 2;
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

// E13's configuration (data/measurements/): GPT-2 124M at s1024 b4 under amp-bf16, dropout 0.1, with peft's
// LoRA of rank 8 on q, k, v, o and the MLP.
inline run_config gpt2_lora_run() {
  run_config r = run_of(1024, 4, recompute_mode::none, attention_kind::flash, 0.1);
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.finetune = finetune_kind::lora;
  r.lora_rank = 8;
  r.lora_targets = lora_q | lora_k | lora_v | lora_o | lora_mlp;
  return r;
}

// Megatron-LM with its bf16 regime (bf16 weights, fp32 gradients and master copy), one sequence of `seq`.
inline run_config megatron_run(std::uint64_t seq) {
  run_config r;
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.seq = seq;
  return r;
}

// A Hugging Face config.json kept in tests/data/hf.
inline std::filesystem::path hf_fixture(const char* name) {
  return std::filesystem::path(TRAINPLAN_TEST_DATA) / "hf" / name;
}

// The headline run under its default profile: Hugging Face with autocast bf16 and foreach AdamW, s 4096.
inline run_config hf_headline_run() {
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.seq = 4096;
  return r;
}

}  // namespace trainplan::test
