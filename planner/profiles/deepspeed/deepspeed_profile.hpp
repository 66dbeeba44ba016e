#pragma once
// DeepSpeed ZeRO under Hugging Face's Trainer (--framework deepspeed): stages 1, 2 and 3 in bf16 (or fp16) mode
// over Hugging Face transformers' modules; per-rank memory as deepspeed_state.hpp lays it out, activations as the
// Hugging Face modules' op lists (planner/profiles/hf/) save them in a 16-bit model.
#include "planner/profiles/profile.hpp"

namespace trainplan {

const stack_profile& deepspeed_profile();

}  // namespace trainplan
