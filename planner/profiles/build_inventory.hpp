#pragma once
// The inventory of one training step as a training stack lays it out: model state, then activations in the
// order they appear.
#include "planner/memory/inventory.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/run/pipeline.hpp"

namespace trainplan {

// The harness's norm backward sums weight gradients in at most this many fp32 partial rows, one per thread
// block (bwd.norm_partials): enough blocks to fill an H100's 132 SMs several times over.
constexpr std::uint64_t harness_norm_partial_rows = 1024;

// Builds the inventory of one training step: model state, then activations in the order they appear.
// `facts` must describe what this GPU holds of `m` (describe_model, or a stage's share); without it they
// are computed here.
inventory build_inventory(const model_spec& m, const run_config& run, const precision_layout& layout,
                          const model_facts* facts = nullptr, const pipeline_stage& stage = {});

}  // namespace trainplan
