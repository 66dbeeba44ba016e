#pragma once
// PyTorch eager + Hugging Face transformers (--framework hf): the Trainer's bf16=True (autocast over an fp32
// model) and foreach AdamW by default, every tensor autograd saves op by op, peft's LoRA, and PyTorch's caching
// allocator replayed over the step. Checked against torch 2.11 and transformers 5.17 on an H100.
#include "planner/profiles/hf/hf_traits.hpp"
#include "planner/profiles/profile.hpp"

namespace trainplan {

const stack_profile& hf_profile();

}  // namespace trainplan
