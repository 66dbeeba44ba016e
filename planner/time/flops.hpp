#pragma once
// FLOPs of one training step: model FLOPs (what the math needs) and hardware FLOPs (what the GPU runs,
// recomputation included).
#include <cstdint>

#include "planner/model/model_spec.hpp"
#include "planner/model/param_count.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"

namespace trainplan {

struct step_flops {
  double tokens_per_step = 0;
  double gemm_forward_per_token = 0;       // 2 * (GEMM weights): the "6N" term's forward third
  double attention_forward_per_token = 0;  // QK^T and attention over V, all layers
  double model_per_step = 0;               // 3 * forward (backward = 2 * forward)
  double model_gemm_per_step = 0;          // model_per_step's share of the GEMMs (gemm_forward_per_token's passes)
  double model_attention_per_step = 0;     // and of attention (attention_forward_per_token's passes)
  double recompute_per_step = 0;           // forward work redone in backward
  double masked_attention_per_step = 0;    // scores computed and then masked out: a sliding window that the
                                           // kernel does not skip (eager attention, Hugging Face's SDPA)
  double padded_vocab_per_step = 0;        // the head's GEMMs over the vocabulary rows past V (a stack that pads
                                           // V to a multiple of 128: param_count.hpp vocab_rows)
  double hardware_per_step = 0;            // model + recompute + masked attention + padded vocabulary
  double six_n_per_step = 0;               // the rule of thumb 6 * params * tokens (active params with MoE)
};

// Narayanan et al. 2021 (Megatron-LM, Sec. 5.1) and Chowdhery et al. 2022 (PaLM, App. B):
//   forward FLOPs per token = 2 * N_gemm + 4 * L * s * (heads * head_dim)
// with N_gemm the weights used in matrix multiplies (the output projection included, even when tied; with
// experts, the router and the top-k experts a token goes to: param_counts::active_matmul) and
// the attention term counting the full s x s score matrix (no causal discount), as both papers do. With
// multi-head latent attention the scores take heads x head_dim (RoPE part included) and the values
// heads x v_head_dim: 2 * L * s * (heads * head_dim + heads * v_head_dim), the same when the two are equal.
// Backward is twice the forward: model FLOPs = 3 * forward * tokens (2 * forward with frozen LoRA bases).
// These are one data-parallel replica's FLOPs (its micro-batches); tensor parallelism shares them.
// Recomputation adds forward work: full reruns every layer's forward (not the head); selective reruns
// the attention core, or under a stack with torchtitan's per-op policy (stack_traits::selective_recompute)
// every second matmul of a layer; flash attention recomputes the scores in its backward, which counts the same.
// `stack`: how the run's stack stores the vocabulary (its padded rows) and whether its kernel skips a window.
step_flops count_flops(const model_spec& m, const run_config& run, const param_counts& params, const stack_traits& stack);

// The keys each query attends to, summed over the layers: s on a full-attention layer, min(s, window) on a
// sliding-window one (Beltagy et al. 2020, Longformer, Sec. 3.1; Jiang et al. 2023, Mistral 7B, Sec. 2;
// Gemma 2 on every other layer), still without the causal discount. Attention model FLOPs per token are
// 2 x (heads x head_dim + heads x v_head_dim) x this. doc_tokens (--packing): rows packed with documents of
// that many tokens, each query attending within its own document (planner/run/packing.hpp), the mean over
// the row's tokens: 4 documents of 1024 in a row of 4096 attend to a quarter of the unpacked row's keys.
double attended_keys(const model_spec& m, std::uint64_t seq, std::uint64_t doc_tokens = 0);

// Whether the run's attention kernel skips the keys outside a sliding window (and, packed, outside each
// document: the flash-attn package's varlen kernel over cu_seqlens): flash attention given the
// window (FlashAttention-2's window_size, which Megatron/Transformer Engine pass) does. Eager attention, and
// a flash kernel that receives the window as an explicit mask (Hugging Face's SDPA path:
// stack_traits::passes_window_to_kernel false), compute every score of the s x s matrix and mask the rest:
// their hardware FLOPs keep the full square.
bool kernel_skips_window(const run_config& run, const stack_traits& stack);

}  // namespace trainplan
