#pragma once
// The PyTorch tensors each buffer of an inventory stands for, as the allocator replay allocates them
// (allocator_schedule.cpp): model state split into its per-parameter tensors, optimizer states made parameter by
// parameter.
#include <cstdint>
#include <string_view>
#include <vector>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/model/model_facts.hpp"

namespace trainplan {

// The parameter tensors a model-state buffer stands for (its scope), when its bytes are exactly theirs in its
// dtype; otherwise (sharded, quantized) it stays one allocation.
// A per-layer buffer stands for the tensors of the layers it covers (DeepSeek-V3's dense first layers hold
// other MLP tensors than its MoE layers).
// With `names`, each allocation's parameter tensor too (for the parameter scopes; left empty for the others).
std::vector<std::uint64_t> split_by_parameters(const tensor_spec& t, const model_facts& facts, const inventory& inv,
                                               std::vector<std::string_view>* names = nullptr);

// The optimizer states of one parameter made together, parameter by parameter (tensor_pieces.cpp says why).
void interleave_optimizer_states(allocator_schedule& schedule, const inventory& inv);

}  // namespace trainplan
