#pragma once
// What a stack whose loss and attention are kernels of its own (llm.c's, Megatron-LM's, the harness's) cannot
// run: the loss variants and the attention implementation that Hugging Face transformers' stacks offer through
// other libraries (torchtune's chunked loss, Liger's fused linear cross-entropy, the flash-attn package).
#include <string_view>

#include "planner/run/run_config.hpp"

namespace trainplan {

// Throws input_error naming the option and `stack` when `run` asks for --loss other than standard or
// --attention flash_attention_2; `loss_note` says how the stack computes its loss.
void refuse_library_kernels(std::string_view stack, std::string_view loss_note, const run_config& run);

}  // namespace trainplan
