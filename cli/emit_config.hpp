#pragma once
// `--emit ENGINE -o FILE`: a configuration for a real training engine that runs the planned setup.
#include <string>
#include <string_view>
#include <vector>

#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan::cli {

struct emitted_file {
  std::string path;
  std::string content;
};

struct emitted_config {
  std::vector<emitted_file> files;
  // What the user must do beyond the files, or where the engine's layout differs from the plan's in a way
  // no key expresses (printed on stderr, one line each).
  std::vector<std::string> notes;
};

// deepspeed: DeepSpeed config JSON; fsdp: Hugging Face Accelerate config YAML (distributed_type FSDP);
// hf-trainer: transformers TrainingArguments JSON (and, for LoRA, a PEFT LoraConfig JSON beside it);
// torchtitan: train config TOML (v0.2's job config); torchtune: the keys of full_finetune_single_device's YAML config
// the plan decides. Throws input_error for what the engine cannot express,
// so that no file runs something other than what was planned without saying so. Each rule names the
// engine's source it was read from. Hyperparameters the plan cannot know (learning rate, weight decay,
// clipping, warmup) are written as the placeholder "SET_ME", which no engine reads as a number, and a note
// says which. Whether the plan fits is the caller's to check (plan refuses to emit one that does not).
emitted_config emit_config(const std::string& engine, const std::string& path, const model_spec& m,
                           const run_config& run);

// The engines emit_config writes for, in --help's order, `separator` between them: for --help and the error
// that names an unknown one.
std::string emit_engine_names(std::string_view separator = " | ");

}  // namespace trainplan::cli
