#include "planner/hf_config.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "planner/input_error.hpp"
#include "planner/text_file.hpp"

namespace trainplan {
namespace {

using json = nlohmann::json;

// Field readers that name the file and the key on error. Hugging Face configs carry many keys the
// planner does not need, so unknown keys are ignored here (unlike data/, which is ours and strict).
struct reader {
  const json& j;
  std::string origin;

  std::uint64_t uint(const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) throw input_error(fmt::format("{}: missing key '{}'", origin, key));
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() == 0)
      throw input_error(fmt::format("{}: key '{}' must be a positive integer", origin, key));
    return it->get<std::uint64_t>();
  }
  std::uint64_t uint_or(const char* key, std::uint64_t fallback) const {
    auto it = j.find(key);
    return (it == j.end() || it->is_null()) ? fallback : uint(key);
  }
  bool boolean_or(const char* key, bool fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) throw input_error(fmt::format("{}: key '{}' must be true or false", origin, key));
    return it->get<bool>();
  }
  double number_or(const char* key, double fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number()) throw input_error(fmt::format("{}: key '{}' must be a number", origin, key));
    return it->get<double>();
  }
};

}  // namespace

model_spec model_from_hf_config_text(std::string_view text, std::string_view origin_view) {
  const std::string origin(origin_view);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // syntax errors, and numbers out of range such as 1e400
    throw input_error(fmt::format("{}: not valid JSON ({})", origin, e.what()));
  }
  if (!j.is_object()) throw input_error(fmt::format("{}: expected a JSON object", origin));
  auto type_it = j.find("model_type");
  if (type_it == j.end() || !type_it->is_string())
    throw input_error(fmt::format("{}: missing key 'model_type'", origin));
  const std::string type = type_it->get<std::string>();
  reader r{j, origin};
  model_spec m;
  m.name = "hf:" + origin;
  m.source = "Hugging Face config " + origin;

  if (type == "gpt2") {
    // GPT2Config: n_layer, n_embd, n_head, n_inner (None -> 4 * n_embd), n_positions, tied by default.
    m.family = model_family::gpt;
    m.layers = r.uint("n_layer");
    m.hidden = r.uint("n_embd");
    m.heads = m.kv_heads = r.uint("n_head");
    m.ffn = r.uint_or("n_inner", 4 * m.hidden);
    m.vocab = r.uint("vocab_size");
    m.max_positions = r.uint("n_positions");
    m.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
    m.dropout = r.number_or("resid_pdrop", 0.1);
  } else if (type == "llama" || type == "mistral" || type == "qwen2") {
    // LlamaConfig / MistralConfig / Qwen2Config: num_key_value_heads defaults to num_attention_heads;
    // Qwen2 puts biases on q, k and v.
    m.family = model_family::llama;
    m.layers = r.uint("num_hidden_layers");
    m.hidden = r.uint("hidden_size");
    m.heads = r.uint("num_attention_heads");
    m.kv_heads = r.uint_or("num_key_value_heads", m.heads);
    m.ffn = r.uint("intermediate_size");
    m.vocab = r.uint("vocab_size");
    m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
    m.qkv_bias = type == "qwen2" || r.boolean_or("attention_bias", false);
    if (type == "llama" && r.boolean_or("attention_bias", false))
      throw input_error(fmt::format("{}: attention_bias=true (a bias on the output projection too) is not modelled",
                                    origin));
    if (r.boolean_or("mlp_bias", false))
      throw input_error(fmt::format("{}: mlp_bias=true is not modelled", origin));
    m.dropout = r.number_or("attention_dropout", 0.0);
  } else {
    throw input_error(fmt::format("{}: model_type '{}' is not supported (supported: gpt2, llama, mistral, qwen2)",
                                  origin, type));
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    m.head_dim = r.uint("head_dim");
  } else {
    if (m.hidden % m.heads != 0)
      throw input_error(fmt::format("{}: hidden size {} is not divisible by {} heads", origin, m.hidden, m.heads));
    m.head_dim = m.hidden / m.heads;
  }
  validate_model(m);
  return m;
}

model_spec model_from_hf_config(const std::filesystem::path& path) {
  return model_from_hf_config_text(read_text_file(path), path.string());
}

}  // namespace trainplan
