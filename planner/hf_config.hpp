#pragma once
// Reads a Hugging Face config.json (GPT-2, Llama, Mistral, Qwen2, Phi-3, Gemma 2 styles) into a model shape.
#include <filesystem>
#include <string_view>

#include "planner/model_spec.hpp"

namespace trainplan {

// The model_type values model_from_hf_config reads, for messages and --help.
inline constexpr const char* supported_hf_model_types = "gpt2, llama, mistral, qwen2, qwen3, phi3, gemma2, mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3";

model_spec model_from_hf_config(const std::filesystem::path& path);  // throws input_error
model_spec model_from_hf_config_text(std::string_view text, std::string_view origin);

}  // namespace trainplan
