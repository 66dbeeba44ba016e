#pragma once
// Reads a Hugging Face config.json (GPT-2, Llama, Mistral, Qwen2, Phi-3, Gemma 2 styles) into a model shape.
#include <filesystem>
#include <string_view>

#include "planner/model/model_spec.hpp"

namespace trainplan {

// The model_type values model_from_hf_config reads, for messages and --help.
inline constexpr const char* supported_hf_model_types = "gpt2, llama, mistral, qwen2, qwen3, phi3, gemma2, mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3";

model_spec model_from_hf_config(const std::filesystem::path& path);  // throws input_error
model_spec model_from_hf_config_text(std::string_view text, std::string_view origin);

// Qwen2's window (transformers 5.x, configuration_qwen2.py, Qwen2Config): use_sliding_window=true makes the
// layers from max_window_layers (default 28) on "sliding_attention" in layer_types, the others full. Returns
// the window of a model whose every layer slides (max_window_layers 0), 0 when none does (max_window_layers
// at least the depth: the collector's 4-layer Qwen2 with its default 28); a partly sliding model is an
// input_error naming `origin`.
std::uint64_t qwen2_window_tokens(std::uint64_t layers, std::uint64_t window, std::uint64_t max_window_layers,
                                  std::string_view origin);
inline constexpr std::uint64_t qwen2_default_max_window_layers = 28;

}  // namespace trainplan
