#pragma once
// This project's own harness (--framework trainplan): exactly the buffers validate/ allocates, which `plan
// validate` checks byte for byte; a fixed set of backward buffers reused by every layer (as llm.c), the
// vocabulary tables and logits padded to a multiple of 128 rows, the fused classifier writing the logits'
// gradient over them.
#include <cstdint>

#include "planner/profiles/profile.hpp"

namespace trainplan {

const stack_profile& trainplan_profile();

// The harness's norm backward sums weight gradients in at most this many fp32 partial rows, one per thread
// block (bwd.norm_partials): enough blocks to fill an H100's 132 SMs several times over.
constexpr std::uint64_t harness_norm_partial_rows = 1024;

}  // namespace trainplan
