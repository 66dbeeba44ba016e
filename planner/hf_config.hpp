#pragma once
// Reads a Hugging Face config.json (GPT-2, Llama, Mistral, Qwen2 styles) into a model shape.
#include <filesystem>
#include <string_view>

#include "planner/model_spec.hpp"

namespace trainplan {

model_spec model_from_hf_config(const std::filesystem::path& path);  // throws input_error
model_spec model_from_hf_config_text(std::string_view text, std::string_view origin);

}  // namespace trainplan
