// Hugging Face config.json into a model_spec (hf_config.hpp): one reader per model_type, each naming the
// configuration class whose keys it reads; an activation or a dropout layout the planner does not model is refused.
#include "planner/io/hf_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/text_file.hpp"

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
  // A count that may be 0 (Qwen2's max_window_layers: 0 makes every layer slide).
  std::uint64_t count_or(const char* key, std::uint64_t fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number_unsigned()) throw input_error(fmt::format("{}: key '{}' must be a non-negative integer", origin, key));
    return it->get<std::uint64_t>();
  }
  bool boolean_or(const char* key, bool fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) throw input_error(fmt::format("{}: key '{}' must be true or false", origin, key));
    return it->get<bool>();
  }
  std::string string_or(const char* key, const char* fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_string()) throw input_error(fmt::format("{}: key '{}' must be a string", origin, key));
    return it->get<std::string>();
  }
  // Keys whose null means "off" while their absence means the config class's default: soft caps, windows.
  double positive_or_off(const char* key, double fallback) const {
    auto it = j.find(key);
    if (it == j.end()) return fallback;
    if (it->is_null()) return 0.0;
    if (!it->is_number() || !(it->get<double>() > 0.0) || !std::isfinite(it->get<double>()))
      throw input_error(fmt::format("{}: key '{}' must be a positive number or null", origin, key));
    return it->get<double>();
  }
  std::uint64_t window_or_off(const char* key, std::uint64_t fallback) const {
    auto it = j.find(key);
    if (it == j.end()) return fallback;
    return it->is_null() ? 0 : uint(key);
  }
  // A dropout probability: a number in [0, 1) (1 would drop everything).
  double probability_or(const char* key, double fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number() || !(it->get<double>() >= 0.0 && it->get<double>() < 1.0))
      throw input_error(fmt::format("{}: key '{}' must be a dropout probability, a number in [0, 1)", origin, key));
    return it->get<double>();
  }
};

// The activation each family's profile models (activations_hf.cpp, hf_layer_ops.cpp): another one would get
// the same prediction, silently.
void require_activation(const reader& r, const char* key, const char* modelled, const char* type) {
  const std::string act = r.string_or(key, modelled);
  if (act != modelled) throw input_error(fmt::format("{}: {} '{}' is not modelled ({}: {})", r.origin, key, act, type, modelled));
}

// The planner has one dropout rate for every dropout site (run_config::dropout): the first key's. Every key
// must be a probability, and all must agree on whether dropout runs at all: a zero rate keeps no mask, so
// dropout on some sites and not on others changes memory in a way one rate cannot say.
double dropout_rate(const reader& r, std::initializer_list<const char*> keys, double fallback) {
  const char* first = *keys.begin();
  const double rate = r.probability_or(first, fallback);
  for (const char* key : keys) {
    const double other = r.probability_or(key, fallback);
    if ((other > 0) != (rate > 0))
      throw input_error(fmt::format("{}: {} {} with {} {} (dropout on some sites only) is not modelled", r.origin, key,
                                    other, first, rate));
  }
  return rate;
}

// GPT2Config: n_layer, n_embd, n_head, n_inner (None -> 4 * n_embd), n_positions, tied by default.
void read_gpt2(const reader& r, model_spec& m) {
  m.family = model_family::gpt;
  m.layers = r.uint("n_layer");
  m.hidden = r.uint("n_embd");
  m.heads = m.kv_heads = r.uint("n_head");
  m.ffn = r.uint_or("n_inner", 4 * m.hidden);
  m.vocab = r.uint("vocab_size");
  m.max_positions = r.uint("n_positions");
  // GPT2Config's attribute_map makes max_position_embeddings another name for n_positions.
  if (r.uint_or("max_position_embeddings", m.max_positions) != m.max_positions)
    throw input_error(fmt::format("{}: max_position_embeddings and n_positions differ", r.origin));
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  require_activation(r, "activation_function", "gelu_new", "gpt2");
  m.dropout = dropout_rate(r, {"resid_pdrop", "attn_pdrop", "embd_pdrop"}, 0.1);
}

// The keys LlamaConfig, MistralConfig, Qwen2Config, Phi3Config and Gemma2Config share.
void read_llama_shape(const reader& r, model_spec& m) {
  m.family = model_family::llama;
  m.layers = r.uint("num_hidden_layers");
  m.hidden = r.uint("hidden_size");
  m.heads = r.uint("num_attention_heads");
  m.kv_heads = r.uint_or("num_key_value_heads", m.heads);
  m.ffn = r.uint("intermediate_size");
  m.vocab = r.uint("vocab_size");
  r.uint_or("max_position_embeddings", 1);  // no parameters (rotary positions), but a positive integer
}

// LlamaConfig / MistralConfig / Qwen2Config: num_key_value_heads defaults to num_attention_heads;
// Qwen2 puts biases on q, k and v. MistralConfig's sliding_window (its default and Mistral-7B-v0.1's
// 4096; null from v0.2 on) applies to every layer (HF MistralAttention).
void read_llama_like(const reader& r, const std::string& type, model_spec& m) {
  read_llama_shape(r, m);
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.qkv_bias = type == "qwen2" || r.boolean_or("attention_bias", false);
  if (type == "llama" && r.boolean_or("attention_bias", false))
    throw input_error(fmt::format("{}: attention_bias=true (a bias on the output projection too) is not modelled", r.origin));
  if (r.boolean_or("mlp_bias", false)) throw input_error(fmt::format("{}: mlp_bias=true is not modelled", r.origin));
  if (type == "qwen2" && r.boolean_or("use_sliding_window", false))
    m.sliding_window_tokens = qwen2_window_tokens(m.layers, r.uint("sliding_window"),
                                                  r.count_or("max_window_layers", qwen2_default_max_window_layers), r.origin);
  if (type == "mistral") m.sliding_window_tokens = r.window_or_off("sliding_window", 4096);
  require_activation(r, "hidden_act", "silu", type.c_str());
  m.dropout = dropout_rate(r, {"attention_dropout"}, 0.0);
}

// Phi3Config (HF transformers): Llama's keys; q/k/v fused into one qkv_proj and gate/up into one
// gate_up_proj, with Llama's parameter counts; no biases; untied by default; head_dim = hidden / heads.
// sliding_window (2047 in Phi-3-mini-4k) applies to every layer; partial_rotary_factor and rope_scaling
// change no parameter.
void read_phi3(const reader& r, model_spec& m) {
  read_llama_shape(r, m);
  m.fused_projections = true;
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  require_activation(r, "hidden_act", "silu", "phi3");
  if (r.boolean_or("attention_bias", false))
    throw input_error(fmt::format("{}: attention_bias=true is not modelled (Phi-3 has no biases)", r.origin));
  m.sliding_window_tokens = r.window_or_off("sliding_window", 0);
  m.dropout = dropout_rate(r, {"resid_pdrop", "embd_pdrop", "attention_dropout"}, 0.0);
}

// Gemma2Config (HF transformers; Gemma Team 2024, "Gemma 2", Table 1): head_dim is its own key (256 in
// the 9B, not hidden / heads), four RMSNorms per layer, GeGLU with the tanh GELU, tied embeddings scaled by
// sqrt(hidden), soft caps on attention scores (50) and final logits (30), and a 4096-token window on
// layers 0, 2, 4, ... (every second layer attends globally). Absent keys take Gemma2Config's defaults.
void read_gemma2(const reader& r, model_spec& m) {
  read_llama_shape(r, m);
  m.kv_heads = r.uint("num_key_value_heads");  // Gemma2Config's default (4) fits only the 2B: require it
  m.head_dim = r.uint("head_dim");
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  m.norms_per_layer = 4;
  m.embed_scale_sqrt_hidden = true;
  // Gemma2MLP reads hidden_activation; the config's hidden_act is a leftover HF no longer reads.
  require_activation(r, "hidden_activation", "gelu_pytorch_tanh", "gemma2");
  m.mlp_gate = gate_activation::gelu_tanh;
  if (r.boolean_or("attention_bias", false))
    throw input_error(fmt::format("{}: attention_bias=true is not modelled (Gemma 2 has no biases)", r.origin));
  m.attn_logit_softcap = r.positive_or_off("attn_logit_softcapping", 50.0);
  m.final_logit_softcap = r.positive_or_off("final_logit_softcapping", 30.0);
  m.sliding_window_tokens = r.window_or_off("sliding_window", 4096);
  if (m.sliding_window_tokens > 0) m.sliding_window_global_every = 2;
  auto types = r.j.find("layer_types");  // newer configs spell the alternation out; it must be Gemma 2's
  if (types != r.j.end() && !types->is_null()) {
    bool alternating = types->is_array() && types->size() == m.layers;
    for (std::size_t i = 0; alternating && i < types->size(); ++i)
      alternating = (*types)[i] == (i % 2 == 0 ? "sliding_attention" : "full_attention");
    if (!alternating)
      throw input_error(fmt::format("{}: layer_types other than sliding/full alternation from layer 0 is not modelled", r.origin));
  }
  m.dropout = dropout_rate(r, {"attention_dropout"}, 0.0);
}

// Qwen3Config / Qwen3MoeConfig (HF transformers): Llama's keys with head_dim its own key (128 in every
// Qwen3) and an RMSNorm over each head's q and k; no biases unless attention_bias.
void read_qwen3_attention(const reader& r, model_spec& m) {
  read_llama_shape(r, m);
  m.head_dim = r.uint_or("head_dim", 0);  // 0: hidden / heads, below
  m.qk_norm = true;
  require_activation(r, "hidden_act", "silu", "qwen3");
  m.qkv_bias = r.boolean_or("attention_bias", false);
  if (m.qkv_bias) throw input_error(fmt::format("{}: attention_bias=true (a bias on o_proj too) is not modelled", r.origin));
  if (r.boolean_or("use_sliding_window", false))
    throw input_error(fmt::format("{}: use_sliding_window=true is not modelled", r.origin));
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.dropout = dropout_rate(r, {"attention_dropout"}, 0.0);
}

// Every layer must be a sparse MoE layer: decoder_sparse_step 1 and no mlp_only_layers (Qwen2-MoE and
// Qwen3-MoE allow dense layers between, which the spec cannot say).
void require_every_layer_sparse(const reader& r) {
  if (r.uint_or("decoder_sparse_step", 1) != 1)
    throw input_error(fmt::format("{}: decoder_sparse_step other than 1 (dense layers between MoE layers) is not modelled", r.origin));
  auto only = r.j.find("mlp_only_layers");
  if (only != r.j.end() && !only->is_null() && !(only->is_array() && only->empty()))
    throw input_error(fmt::format("{}: mlp_only_layers (dense layers among the MoE layers) is not modelled", r.origin));
}

// Qwen2MoeConfig and Qwen3MoeConfig name their routed experts alike: num_experts of width
// moe_intermediate_size (intermediate_size is their dense layers' width), num_experts_per_tok per token.
void read_qwen_experts(const reader& r, model_spec& m) {
  require_every_layer_sparse(r);
  m.experts = r.uint("num_experts");
  m.experts_per_token = r.uint("num_experts_per_tok");
  m.ffn = r.uint("moe_intermediate_size");
}

// MixtralConfig: Mistral's keys, num_local_experts experts of width intermediate_size, num_experts_per_tok
// of them per token; sliding_window null in the released models (a window applies to every layer).
void read_mixtral(const reader& r, model_spec& m) {
  read_llama_shape(r, m);
  m.head_dim = r.uint_or("head_dim", 0);
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  require_activation(r, "hidden_act", "silu", "mixtral");
  m.experts = r.uint("num_local_experts");
  m.experts_per_token = r.uint("num_experts_per_tok");
  m.sliding_window_tokens = r.window_or_off("sliding_window", 0);
  m.dropout = dropout_rate(r, {"attention_dropout"}, 0.0);
}

// Qwen2MoeConfig: Qwen2's attention (q/k/v biases), num_experts experts of width moe_intermediate_size,
// num_experts_per_tok per token, and a shared expert of width shared_expert_intermediate_size.
void read_qwen2_moe(const reader& r, model_spec& m) {
  read_llama_shape(r, m);
  m.qkv_bias = true;
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  require_activation(r, "hidden_act", "silu", "qwen2_moe");
  if (r.boolean_or("use_sliding_window", false))
    throw input_error(fmt::format("{}: use_sliding_window=true is not modelled", r.origin));
  read_qwen_experts(r, m);
  m.shared_expert_ffn = r.uint_or("shared_expert_intermediate_size", 0);
  m.dropout = dropout_rate(r, {"attention_dropout"}, 0.0);
}

// Qwen3MoeConfig: Qwen3's attention, num_experts experts of width moe_intermediate_size, no shared expert.
void read_qwen3_moe(const reader& r, model_spec& m) {
  read_qwen3_attention(r, m);
  read_qwen_experts(r, m);
}

// DeepseekV2Config / DeepseekV3Config (HF transformers; DeepSeek-AI 2024, arXiv:2405.04434 and
// arXiv:2412.19437): multi-head latent attention (kv_lora_rank, q_lora_rank or null, qk_nope_head_dim +
// qk_rope_head_dim per q/k head, v_head_dim per value head), first_k_dense_replace dense layers of
// intermediate_size, then MoE layers of n_routed_experts experts of moe_intermediate_size, num_experts_per_tok
// per token, and n_shared_experts always-on experts (one MLP of their summed width, ungated). DeepSeek-V3's
// noaux_tc routing adds its per-expert score bias (a buffer). The multi-token-prediction module
// (num_nextn_predict_layers) is not part of HF's model, and not of this one.
void read_deepseek(const reader& r, const std::string& type, model_spec& m) {
  read_llama_shape(r, m);
  m.kv_heads = m.heads;  // every head has its keys and values, decompressed from the latent
  require_activation(r, "hidden_act", "silu", type.c_str());
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  if (r.boolean_or("attention_bias", false))
    throw input_error(fmt::format("{}: attention_bias=true is not modelled", r.origin));
  if (r.uint_or("moe_layer_freq", 1) != 1)
    throw input_error(fmt::format("{}: moe_layer_freq other than 1 (dense layers between MoE layers) is not modelled", r.origin));
  m.kv_lora_rank = r.uint("kv_lora_rank");
  m.q_lora_rank = r.uint_or("q_lora_rank", 0);
  m.rope_head_dim = r.uint("qk_rope_head_dim");
  m.head_dim = r.uint("qk_nope_head_dim") + m.rope_head_dim;
  m.v_head_dim = r.uint("v_head_dim");
  m.experts = r.uint("n_routed_experts");
  m.experts_per_token = r.uint("num_experts_per_tok");
  m.ffn = r.uint("moe_intermediate_size");
  m.dense_layers = r.uint_or("first_k_dense_replace", 0);
  if (m.dense_layers > 0) m.dense_ffn = r.uint("intermediate_size");
  m.shared_expert_ffn = checked_mul(r.uint_or("n_shared_experts", 0), m.ffn, "shared experts' width");
  m.shared_expert_gate = false;
  m.router_score_bias = type == "deepseek_v3" || r.string_or("topk_method", "") == "noaux_tc";
  m.dropout = dropout_rate(r, {"attention_dropout"}, 0.0);
}

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
    read_gpt2(r, m);
  } else if (type == "llama" || type == "mistral" || type == "qwen2") {
    read_llama_like(r, type, m);
  } else if (type == "qwen3") {
    read_qwen3_attention(r, m);
  } else if (type == "mixtral") {
    read_mixtral(r, m);
  } else if (type == "qwen2_moe") {
    read_qwen2_moe(r, m);
  } else if (type == "qwen3_moe") {
    read_qwen3_moe(r, m);
  } else if (type == "phi3") {
    read_phi3(r, m);
  } else if (type == "gemma2") {
    read_gemma2(r, m);
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    read_deepseek(r, type, m);
  } else {
    throw input_error(fmt::format("{}: model_type '{}' is not supported (supported: {})", origin, type,
                                  supported_hf_model_types));
  }
  if (m.head_dim == 0) {
    if (j.contains("head_dim") && !j["head_dim"].is_null()) {
      m.head_dim = r.uint("head_dim");
    } else {
      if (m.hidden % m.heads != 0)
        throw input_error(fmt::format("{}: hidden size {} is not divisible by {} heads", origin, m.hidden, m.heads));
      m.head_dim = m.hidden / m.heads;
    }
  }
  validate_model(m);
  return m;
}

model_spec model_from_hf_config(const std::filesystem::path& path) {
  return model_from_hf_config_text(read_text_file(path), path.string());
}

std::uint64_t qwen2_window_tokens(std::uint64_t layers, std::uint64_t window, std::uint64_t max_window_layers,
                                  std::string_view origin) {
  if (max_window_layers >= layers) return 0;
  if (max_window_layers == 0) return window;
  throw input_error(fmt::format("{}: a sliding window on layers {} to {} only (use_sliding_window, max_window_layers {}) "
                                "is not modelled: the profile slides every layer or none",
                                origin, max_window_layers, layers - 1, max_window_layers));
}

}  // namespace trainplan
