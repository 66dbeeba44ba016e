#pragma once
// Megatron-LM with Transformer Engine (--framework megatron): each layer's activations as Korthikanti et al.
// 2022 count them, split by tensor, sequence, pipeline and expert parallelism; bf16 weights with fp32
// gradients accumulated in main_grad and an fp32 master copy.
#include "planner/profiles/profile.hpp"

namespace trainplan {

const stack_profile& megatron_profile();

}  // namespace trainplan
