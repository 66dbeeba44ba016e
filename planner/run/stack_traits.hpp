#pragma once
// How a training stack stores and runs a model, as plain data that the layers below the profiles take as an
// argument (planner/profiles/profile.hpp holds each stack's): they never ask which stack a run uses.
#include <cstdint>

namespace trainplan {

// What a stack's selective recomputation (--recompute selective) reruns in a layer's backward.
enum class selective_recompute_kind : std::uint8_t {
  attention_core,  // the attention core (Korthikanti et al. 2022, Sec. 5): Megatron-LM's
  op_policy,       // torchtitan's per-op policy (planner/run/selective_checkpoint.hpp): every second matmul and
                   // the ops no policy saves; the other matmuls and attention kept
};

struct stack_traits {
  // Its vocabulary tables (and logits) are rounded up to a multiple of this many rows (planner/model/
  // param_count.hpp vocab_rows): llm.c pads to 128 for aligned GEMMs; 1 stores the vocabulary as it is.
  std::uint64_t vocab_pad_multiple = 1;
  // Its flash attention kernel is given a sliding window and skips the keys outside it (FlashAttention-2's
  // window_size, as Transformer Engine passes it); false: the window arrives as a mask over the full s x s
  // scores, every one computed (Hugging Face's SDPA path), which the hardware FLOPs keep.
  bool passes_window_to_kernel = true;
  // It runs a model's fused projections (Phi-3's qkv_proj, gate_up_proj) as the model defines them, so LoRA
  // through peft adapts each as one module; false: separate q, k, v and gate, up projections.
  bool keeps_fused_projections = false;
  // It splits each sequence over --cp GPUs and passes attention's keys and values round them as a ring (Megatron-Core
  // with Transformer Engine's AttnFuncWithCPAndKVP2P); false: a stack without context parallelism refuses --cp.
  bool context_parallel = false;
  selective_recompute_kind selective_recompute = selective_recompute_kind::attention_core;
  // Its attention module copies the grouped keys and values out to every query head before the attention kernel
  // (torchtune's MultiHeadAttention.forward, torchtune/modules/attention.py: view, expand, reshape), so the kernel
  // saves q-wide keys and values and their gradients are summed back per group in the backward; false: the
  // grouped heads reach the kernel as they are (transformers' sdpa_attention_forward with enable_gqa).
  bool expands_kv_heads = false;
  // Its model returns fp32 logits (torchtune's TransformerDecoder: self.output(h).float()), which its training loop
  // deletes once the loss is computed (its recipes' `del logits`); false: the model returns the head's logits,
  // which the loop holds until after backward, and the loss upcasts them (transformers' ForCausalLMLoss).
  bool model_upcasts_logits = false;
};

}  // namespace trainplan
