#pragma once
// `--emit ENGINE -o FILE`: a configuration for a real training engine that runs the planned setup.
#include <string>
#include <vector>

#include "planner/model_spec.hpp"
#include "planner/run_config.hpp"

namespace trainplan::cli {

struct emitted_file {
  std::string path;
  std::string content;
};

// deepspeed: DeepSpeed config JSON; fsdp: Hugging Face Accelerate config YAML (distributed_type FSDP);
// hf-trainer: transformers TrainingArguments JSON (and, for LoRA, a PEFT LoraConfig JSON beside it);
// torchtitan: train config TOML. Throws input_error for what the engine cannot express.
std::vector<emitted_file> emit_config(const std::string& engine, const std::string& path, const model_spec& m,
                                      const run_config& run);

}  // namespace trainplan::cli
