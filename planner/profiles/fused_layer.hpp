#pragma once
// The operation list of a transformer step whose kernels fuse each layer's work: Megatron-LM with Transformer
// Engine, this project's harness and llm.c. Each operation is written once, with the buffers it keeps for the
// backward (the memory rows, as Korthikanti et al. 2022 count them: Sec. 4.1, 34sbh + 5as^2b per layer with
// dropout, 2sbh under full recomputation; split by tensor and sequence parallelism, their Table 2) and what it
// computes (the step's operations: one kernel per norm, activation, residual and loss, flash attention as one
// fused kernel, GEMMs through cuBLAS; Mixture-of-Experts layers as Megatron-Core's MoELayer and latent attention
// as its MLASelfAttention run them). Walking the list builds the inventory, or the step's operations, or both.
#include <cstdint>

#include "planner/memory/inventory_builder.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/model/param_count.hpp"
#include "planner/profiles/step_frame.hpp"
#include "planner/run/pipeline.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"

namespace trainplan {

// How the loss reads the logits.
enum class fused_loss {
  fp32_copy,         // the loss upcasts the logits to fp32 and writes their gradient apart (Megatron's
                     // vocab_parallel_cross_entropy)
  fused_classifier,  // softmax, loss and the logits' gradient in one kernel, written over the logits (llm.c)
};

// Where the stacks' fused kernels differ.
struct fused_layer_options {
  stack_traits traits;
  fused_loss loss = fused_loss::fp32_copy;
  bool fused_residual_norm = false;  // the residual add and the next norm in one kernel (the harness)
  bool recomputes_gelu = false;      // any recomputation reruns GELU in the MLP's backward (llm.c's -r 1 and -r 2)
  // Eager attention drops out the probabilities in a kernel of its own after the softmax (Megatron-LM's CoreAttention,
  // Transformer Engine's UnfusedDotProductAttention: torch's dropout on the softmax's output), not inside the softmax.
  bool attention_dropout_kernel = false;
};

// One step of `m` under `run`, as a stack with these options runs it.
struct fused_step {
  const model_spec& model;
  const run_config& run;
  const precision_layout& layout;
  fused_layer_options options;
};

// The memory side of a walk: the builder the buffers go to, the parameters this GPU holds (for autocast's
// weight copies), and its pipeline stage.
struct fused_memory {
  inventory_builder& inv;
  const param_counts& counts;
  pipeline_stage stage;
};

// Walks the step's operations in program order: the embedding, one layer, the head and the loss, then the
// backward's reused gradient buffers. With `memory`, adds each operation's buffers; with `ops`, each operation's
// work (planner/profiles/step_frame.hpp).
void walk_fused_step(const fused_step& step, const fused_memory* memory, step_rows* ops);

}  // namespace trainplan
