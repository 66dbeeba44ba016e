#pragma once
// llm.c (karpathy/llm.c, train_gpt2.cu) with its default GELU recomputation and fused classifier (--framework
// llmc): its one block of parameters, gradients, AdamW state and master weights, one block of activations for
// every layer, and its few large cudaMalloc'd buffers.
#include "planner/profiles/profile.hpp"

namespace trainplan {

const stack_profile& llmc_profile();

}  // namespace trainplan
