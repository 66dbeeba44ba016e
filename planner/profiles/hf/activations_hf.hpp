#pragma once
// The activations of one training step of PyTorch eager + Hugging Face transformers (--framework hf):
// every tensor autograd saves for backward, the loss's fp32 buffers, and the working sets that exist only
// within one event. Read off the saved-tensor inventories measured with torch 2.11 and transformers 5.17 on
// an H100 (../shared/measurements/, copied with provenance into tests/data/measurements/).
#include <array>

#include "planner/memory/inventory_builder.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/run/stack_traits.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/model/param_count.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// Which of the step's events its rows write op by op, in program order (inventory::forward_in_program_order,
// backward_programs), and where they do not, what in the run has no op order written (empty where all is).
struct hf_program_order {
  bool forward = false;
  std::string_view coarse_forward, coarse_backward;
};

// What in the run has no op order written in the rows of a layer's forward (hf_program_order::coarse_forward),
// before any is built; empty where every module's is.
std::string_view hf_coarse_forward_reason(const model_spec& m, const run_config& run, const precision_layout& layout);

// Adds the hf profile's activations: every tensor autograd saves and the working sets of each event, in the order
// the forward creates them. Where the rows write a layer's forward op by op (GPT-2's block; a dense Llama-family
// layer with separate projections, two norms, SDPA without a mask or eager attention; peft's modules), the
// temporaries carry their own free points (tensor_spec::freed_after), which the allocator replay makes and
// frees where PyTorch does; GPT-2's backward is written op by op too, into `backward`
// (inventory::backward_programs).
// `traits`: how the stack's modules differ from transformers' (stack_traits::expands_kv_heads,
// model_upcasts_logits); LoRA's adapters are always peft's.
hf_program_order add_hf_activations(inventory_builder& inv, const model_spec& m, const run_config& run, const precision_layout& layout,
                        const param_counts& counts, std::array<backward_program, 3>& backward,
                        const stack_traits& traits);

}  // namespace trainplan
