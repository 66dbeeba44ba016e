#pragma once
// The model state one GPU holds through a step: weights (or a frozen, possibly quantized base and LoRA
// adapters), the master copy, gradients, optimizer state and the data-parallel communication buffers, sharded
// as ZeRO stages shard them (Rajbhandari et al. 2020) over the data-parallel GPUs, split by tensor parallelism
// and expert parallelism, and placed on the host where offloaded.
#include "planner/memory/inventory.hpp"
#include "planner/memory/inventory_builder.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"

namespace trainplan {

// What a stack's runtime does with the model state beyond the regime's layout (set by each profile).
struct model_state_rules {
  // PyTorch's autograd: each parameter's .grad is made by its own backward and freed by
  // zero_grad(set_to_none=True), so gradients appear layer by layer (unless ZeRO-2/3 shards them into one
  // buffer); AccumulateGrad's incoming vocabulary-table gradients come with them. false: one gradient buffer
  // from the step's first backward to its optimizer step.
  bool grads_per_parameter = false;
  // peft's LoRA: adapters, their gradients and optimizer state in fp32 (or the model's dtype when the model
  // was cast after get_peft_model: run.lora_fp32 false) with no master copy, over a frozen base in the model's
  // own dtype. false: adapters in the regime's layout over a bf16 base.
  bool peft_adapters = false;
  // PyTorch's foreach AdamW (run.optimizer_impl foreach): sqrt(v) computed into new tensors for every
  // parameter at once, a temporary as large as the second moment during the optimizer step.
  bool foreach_adamw = false;
  // torch.amp.GradScaler's scalars, where the regime scales the loss.
  bool grad_scaler = false;
  // The data-parallel communication buffers ZeRO's paper describes (Rajbhandari et al. 2020): ZeRO-3 gathers
  // each layer's weights before use, prefetching the next, and reduce-scatters its gradients through a bucket
  // of one layer; below ZeRO-3 (ddp_bucket) a 25 MiB gradient bucket, PyTorch DDP's bucket_cap_mb. A stack whose
  // runtime allocates its own (DDP's full bucket copy, FSDP2's and DeepSpeed's buffers) or none (llm.c's and
  // Megatron's collectives work in place in their buffers) adds them itself.
  bool zero3_gather_buffers = false;
  bool ddp_bucket = false;
};

// Adds the model state of `m` on one GPU to `out` (device tensors, and host_tensors where offloaded; the LoRA
// adapters' tensors in out.adapter_layer_tensors). `facts` describe what this GPU holds of the model (a
// pipeline stage's share, or describe_model).
void add_model_state(inventory& out, const model_spec& m, const run_config& run, const precision_layout& layout,
                     const model_facts& facts, const stack_traits& traits, const model_state_rules& rules);

// The token table's incoming gradients where PyTorch's autograd makes them for per-parameter .grad tensors:
// embedding_dense_backward's [V, h] gradient, and with tied embeddings the head's contribution held until the
// table's own arrives (model_state.cpp says when each lives). For a stack that keeps PyTorch's .grad tensors.
void add_incoming_table_gradients(inventory_builder& inv, const model_spec& m, dtype grads);

}  // namespace trainplan
