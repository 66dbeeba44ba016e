#pragma once
// --model NAME: a preset of the catalog (by name or Hugging Face id), else a repository the local Hugging Face hub
// cache holds, read from its config.json as --hf-config reads one.
#include <string>
#include <string_view>

#include "planner/io/catalog.hpp"
#include "planner/io/hf_cache.hpp"
#include "planner/model/model_spec.hpp"

namespace trainplan {

struct named_model {
  model_spec spec;
  std::string note;  // for a cached config: which file was read; empty for a preset
};

// Throws input_error for a name neither holds: the known presets, the closest, and where the cache was looked in.
named_model model_by_name(const catalog& data, std::string_view name, const env_lookup& env = process_env);

}  // namespace trainplan
