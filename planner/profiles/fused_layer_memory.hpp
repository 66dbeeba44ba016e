#pragma once
// The activations of a transformer step whose kernels fuse each layer's work as Korthikanti et al. 2022 count
// it (Sec. 4.1: 34sbh + 5as^2b per layer with dropout, 2sbh under full recomputation), split by tensor and
// sequence parallelism (their Table 2): Megatron-LM with Transformer Engine and this project's harness keep
// these buffers, with a fixed set of activation-gradient buffers reused by every layer (as llm.c).
#include <cstdint>

#include "planner/memory/inventory_builder.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/model/param_count.hpp"
#include "planner/run/pipeline.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// How the loss reads the logits.
enum class fused_loss {
  fp32_copy,         // the loss upcasts the logits to fp32 and writes their gradient apart (Megatron's
                     // vocab_parallel_cross_entropy)
  fused_classifier,  // softmax, loss and the logits' gradient in one kernel, written over the logits (llm.c)
};

// Adds the embedding's, every layer's and the head's activations (the last pipeline stage's head and loss,
// another stage's output sent on) and the backward's reused gradient buffers. `pc`: the parameters this GPU
// holds; `vocab_rows`: the logits' width before tensor parallelism splits it.
void add_fused_activations(inventory_builder& inv, const model_spec& m, const run_config& run, const precision_layout& layout,
                           const param_counts& pc, const pipeline_stage& stage, std::uint64_t vocab_rows, fused_loss loss);

}  // namespace trainplan
