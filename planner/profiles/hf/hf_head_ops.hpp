#pragma once
// The hf profile's operations around the decoder layers, in program order: the embedding (with the batch and
// what the model builds before layer 0: masks, rotary tables), the final norm, the head, Gemma 2's logit soft
// cap and the loss. Each is described once, in hf_head_ops.cpp: the buffers it makes (into an inventory) and
// the kernels it launches (into a step's work).
#include <cstdint>

#include "planner/memory/inventory_builder.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"
#include "planner/time/step_ops_builder.hpp"

namespace trainplan {

// What the head's buffers depend on beyond the model and the run: how planner/profiles/hf/activations_hf.cpp
// lays out the forward.
struct hf_head_layout {
  std::uint64_t holds = 0;       // the run's row conditions (hf_rows::when_bits)
  bool program = false;          // the forward written op by op (momentary buffers with free points)
  bool own_input = false;        // a 16-bit Llama op by op, not checkpointed: the layer input is its own tensor
  bool layer0_without_input_grad = false;  // LoRA without checkpointing: nothing before layer 0 needs a gradient
  // The model returns fp32 logits, which the loop deletes after the loss (stack_traits::model_upcasts_logits).
  bool model_upcasts_logits = false;
};

// The head's buffers, added to `inv` in the order the forward makes them.
void add_hf_head_buffers(inventory_builder& inv, const model_spec& m, const run_config& run,
                         const precision_layout& layout, const hf_head_layout& head);
// The head's kernels, added to `head` (one micro-batch's group of a step's work).
void add_hf_head_kernels(ops::row_group& head, const model_spec& m, const run_config& run, const precision_layout& layout,
                         const stack_traits& traits);

}  // namespace trainplan
