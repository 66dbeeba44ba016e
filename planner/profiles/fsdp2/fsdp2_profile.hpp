#pragma once
// PyTorch FSDP2 (--framework fsdp2): fully_shard over Hugging Face transformers' modules, wrapped as torchtitan
// and Accelerate's FSDP2 wrap a decoder model, MixedPrecisionPolicy with bf16 parameters; per-rank memory as
// fsdp2_state.hpp lays it out, activations as the Hugging Face modules' op lists (planner/profiles/hf/) save them
// in a 16-bit model.
#include "planner/profiles/profile.hpp"

namespace trainplan {

const stack_profile& fsdp2_profile();

}  // namespace trainplan
