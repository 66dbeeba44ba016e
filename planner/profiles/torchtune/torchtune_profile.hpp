#pragma once
// torchtune (--framework torchtune): its single-device full fine-tuning recipe (recipes/full_finetune_single_device.py)
// over its own decoder (torchtune/modules/transformer.py, attention.py), in bf16 or fp32 without autocast. Its layers
// save what transformers' Llama layers save (the same norms, rotary embedding, SwiGLU and SDPA: the rows of
// planner/profiles/hf/), but for two things its modules do otherwise (stack_traits): the attention copies the
// grouped keys and values out to every query head before SDPA, and the model returns fp32 logits, which the recipe
// deletes after the loss. Its torch.compile is its own: each decoder layer and the loss compiled apart.
#include "planner/profiles/profile.hpp"

namespace trainplan {

const stack_profile& torchtune_profile();

}  // namespace trainplan
