#pragma once
// The vocabulary of the hf profile's rows (planner/profiles/hf/activations_hf_rows.hpp): the shape rules, dtype roles,
// keep classes and conditions a row is written in, and the row itself. Read by planner/profiles/hf/activations_hf.cpp,
// which turns the rows into the inventory.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trainplan::hf_rows {

// The shape of a row, from the model and the run (b micro-batch, s sequence, h hidden, f ffn, a heads).
enum class shape_rule {
  bsh,         // [b, s, h]
  bsf,         // [b, s, f]
  bs_qkv,      // [b, s, q + 2kv]: GPT-2's fused c_attn output (Phi-3's qkv_proj), of which q, k and v are views
  bs2f,        // [b, s, 2f]: Phi-3's gate_up_proj output, of which gate and up are views
  bs_q,        // [b, a, s, d]
  bs_kv,       // [b, kv, s, d]
  bs_kv_sdpa,  // [b, kv, s, d] as SDPA receives k and v: q's heads where they were repeated (a mask, kv_expanded)
  bs_v,        // [b, a, s, d_v]: the attention output (d_v = d but with multi-head latent attention)
  bs_1,        // [b, s, 1]
  two_bs,      // mean and rstd of a LayerNorm, [b, s, 1] each
  bas,         // [b, a, s]
  bas32,       // [b, a, roundup(s, 32)]: memory-efficient attention's log-sum-exp
  b1ss,        // [b, 1, s, s]: an attention mask made a bias (the efficient kernel pads s to a multiple of 8)
  ss,          // [s, s]: SDPA's math path's causal mask
  bas_rows,    // [b, a, s]: _safe_softmax's per-row test
  bass,        // [b, a, s, s]
  qkv_casts,   // [n, b, s, h]: autocast casts the norm output once per linear that reads it (Llama q/k/v: 3)
  fc_casts,    // [n, b, s, h]: likewise for the MLP's input (Llama gate/up: 2)
  matmul,      // the layer's GEMM weights: autocast's bf16 copies
  matmul_after_qkv,  // those but q, k and v (w_qkv)
  // One GPT-2 module's weight (Conv1D, [in, out]): autocast's copy, cast where its GEMM runs.
  w_qkv,       // c_attn: h x 3h
  w_o,         // attn.c_proj: h x h
  w_fc,        // mlp.c_fc: h x f
  w_proj,      // mlp.c_proj: f x h (Llama: down_proj; w_fc: gate_proj and up_proj)
  w_q,         // Llama's q_proj: h x (a d)
  w_kv,        // Llama's k_proj and v_proj: h x (kv d)
  bs_q_half,   // [b, a, s, d/2]: rotate_half's -x2
  bs_kv_half,  // [b, kv, s, d/2]
  // Mixture of Experts (T = b*s tokens, R = k*T rows routed to experts, E experts, k per token):
  te,          // [T, E]: the router's probabilities
  tk,          // [T, k]: the top-k choice and weights
  r_1,         // [R]: which token each routed row came from
  r_h,         // [R, h]
  r_f,         // [R, f]
  r_2f,        // [R, 2f]: the experts' fused gate_up output
  ekt,         // [E, k, T]: the one-hot expert mask the expert loop walks
  bs_fs,       // [b, s, f_shared]: Qwen2-MoE's shared expert
  // Multi-head latent attention (DeepSeek): the query and key-value latents, and kv_b_proj's output.
  bs_qr,       // [b, s, q_lora_rank]
  bs_kvr,      // [b, s, kv_lora_rank]
  bs_kvb,      // [b, s, a x (d - rope + d_v)]: each head's non-RoPE key and value
  // peft's LoRA (the adapted linears' inputs and lora_A's outputs, r the rank):
  peft_qkv_in, // [n, b, s, h]: one copy per adapted q, k, v (GPT-2: c_attn), or the one input they share
  peft_qkv_a,  // [n, b, s, r]: lora_A's output per adapted q, k, v module
  bs_o,        // [b, s, hq]: the attention output o_proj reads
  peft_fc_in,  // [n, b, s, h]: one copy per adapted gate and up (GPT-2: c_fc), or the one input they share
  peft_fc_a,   // [n, b, s, r]
  bs_r,        // [b, s, r]
  // Autocast's 16-bit copies of one layer's fp32 LoRA adapters (peft: r x in for lora_A, out x r for lora_B):
  lora_w_qkv_a,  // the q, k, v modules' lora_A (GPT-2, Phi-3: the one fused module's)
  lora_w_rest,   // every other adapter of the layer
  bs_qw,       // [b, s, a d]: q_proj's output as the linear writes it
  bs_kvw,      // [b, s, kv d]: k_proj's and v_proj's
  // GPT-2's backward op by op (planner/profiles/hf/activations_hf_backward.hpp):
  reduce_bsh,     // [2, b, s, h], fp32: the staging buffer of a bias gradient's column sum
  reduce_bsf,     // [2, b, s, f]
  reduce_bs_qkv,  // [2, b, s, q + 2kv]
  sdpa_bwd,       // [b, a, s, d + 1], fp32: the fused SDPA backward's workspace
  // The flash-attn package (flash_api.cpp, mha_fwd and mha_bwd):
  rng_state,      // [2], int64: the Philox seed and offset mha_fwd allocates on the GPU whether or not it drops out
  fa_dq_accum,    // [b, roundup(s, 128), a, roundup(d, 32)], fp32: mha_bwd's dq accumulator
  fa_softmax_d,   // [b, a, roundup(s, 128)], fp32: mha_bwd's rowsum(dO * O)
  // Packed (--packing), flash_attn_varlen_func over the micro-batch's n documents (mha_varlen_fwd, mha_varlen_bwd):
  // its dq accumulator [b s + 128 n, a, roundup(d, 32)] and rowsum [a, b s + 128 n] (the two rules above), and
  cu_seqlens,     // [n + 1], int32: the documents' cumulative lengths
};

// The dtype a row is kept in.
enum class dtype_role {
  compute,    // the GEMM dtype: bf16/fp16 under autocast or in a 16-bit model, fp32 otherwise
  param,      // the parameters' dtype: the residual stream, and what autocast runs in fp32 (pow, norms)
  fp32,       // always fp32 (RMSNorm's upcast, the log-sum-exp, Llama's softmax)
  probs,      // the softmax output: fp32 for Llama (softmax(dtype=float32)) and the math path, param for GPT-2
  norm_input, // Llama: the fp32 upcast RMSNorm saves, or the bf16 layer input a checkpoint keeps; GPT-2: param
  mask,       // bool dropout masks, 1 byte
  index,      // int64 indices (topk, index_select, one_hot)
  index32,    // int32 offsets (flash-attn's cu_seqlens)
  adapter_in, // what a LoRA adapter's lora_A saves: the GEMM dtype under autocast, else the adapters' dtype
};

// How long a row lives within a micro-batch.
enum class keep_class {
  layer_input,       // the residual stream entering the layer: kept under every recompute mode
  // The residual stream entering the layer where nothing saves it (a 16-bit Llama op by op, not checkpointed:
  // RMSNorm saves an fp32 copy): the previous layer's output, held until this layer's output exists.
  layer_input_moment,
  saved,             // saved by autograd from the layer's forward to its backward (recomputed under checkpointing)
  forward_working,   // exists while the layer's forward runs
  // A temporary of the layer's forward, made and freed in program order by the allocator replay, from where
  // its op writes it to where the Python variable holding it goes (hf_row::until); the peak timeline leaves
  // it out (tensor_spec::momentary), counting a forward_estimate row instead.
  forward_moment,
  forward_estimate,  // the peak timeline's forward working set where forward_moment rows spell it out
  backward_working,  // exists while the layer's backward runs
  backward_moment,   // exists for a moment within the layer's backward (tensor_spec::momentary)
  backward_estimate, // the peak timeline's backward working set where backward_moment rows spell it out
  autocast_cache,    // autocast's weight copies: saved, or under checkpointing cached until the forward ends
  frozen_cast,       // autocast's copies of frozen weights: not cached, saved by the GEMM's backward
};

// What a run holds, which rows name as conditions (a row's `condition`, below).
enum when_bits : std::uint64_t {
  gpt = 1u << 0, llama = 1u << 1, amp = 1u << 2, dropout = 1u << 3,
  sdpa_saves_qkv = 1u << 4,   // fused or efficient backend: q, k, v saved as they are (GPT-2: views of c_attn's output)
  attn_copies = 1u << 5,      // eager or math: contiguous q, k^T, v copies, k and v repeated to every head
  attn_probs = 1u << 6,       // eager or math: the s x s probabilities are kept
  probs_copy = 1u << 7,       // the probabilities the matmul reads are a second tensor (cast or dropped out)
  lse_fused = 1u << 8, lse_efficient = 1u << 9,
  // Which weights train: a frozen linear layer's backward needs only its weight for the input's gradient,
  // so autograd saves its input only when the weight (or a LoRA adapter on it) trains.
  trains_qkv = 1u << 10, trains_mlp = 1u << 11, trains_all = 1u << 12,
  scores_upcast = 1u << 13,  // the scores are in a 16-bit dtype and softmax runs in fp32
  math_path = 1u << 14,      // SDPA's math backend
  scores_same_dtype = 1u << 15,  // not scores_upcast
  dense_mlp = 1u << 16,      // one MLP for every token (every GPT-2 and dense Llama-family layer)
  moe = 1u << 17,            // experts (model_spec::experts)
  shared_expert = 1u << 18,  // with Qwen2-MoE's shared expert
  post_norms = 1u << 19,     // Gemma 2's post-attention and post-feedforward RMSNorms
  attn_softcap = 1u << 20,   // Gemma 2's soft cap on the scores (eager attention; SDPA has none)
  shared_gate = 1u << 21,    // Qwen2-MoE's sigmoid gate on the shared expert (DeepSeek's has none)
  mla = 1u << 22,            // multi-head latent attention (DeepSeek-V2/V3)
  mla_q_lora = 1u << 23,     // with the query latent (q_lora_rank > 0)
  gqa_values = 1u << 24,     // values a tensor of their own (every attention but MLA, and Phi-3's SDPA: v_in_qkv)
  // LoRA through peft on a dense GPT-2 or Llama-family model (QLoRA, MoE and MLA adapters keep the
  // trains_* rows): which adapted linears' inputs lora_A saves, and whether each module saves a copy
  // of its own (under autocast, or when peft casts the input to the adapters' fp32).
  peft = 1u << 25, peft_qkv = 1u << 26, peft_o = 1u << 27, peft_mlp = 1u << 28, peft_copies = 1u << 29,
  norms_train = 1u << 30,  // the norms' weights train: a norm's weight multiply saves the normalised input
  // A marker, not a condition: the row is saved only when the layer's input requires grad. Under LoRA
  // without checkpointing the frozen embedding's output does not, so layer 0 saves none of these.
  input_grad = 1u << 31,
  // transformers built a sliding-window mask (hf_sliding_window_mask): k and v repeated to every head,
  // and the mask turned into a bias SDPA saves.
  sdpa_mask = 1ull << 32,
  // peft's lora_dropout above 0: each adapted linear drops out its own input (so each saves a copy: with
  // peft_copies) and native_dropout saves a bool mask per module.
  peft_dropout = 1ull << 33,
  // Phi-3 (model_spec::fused_projections): one qkv_proj and one gate_up_proj whose outputs are sliced into
  // views (Phi3Attention, Phi3MLP), or Llama's separate projections.
  fused_proj = 1ull << 34, separate_proj = 1ull << 35,
  // SDPA saves the values as a view of qkv_proj's output (no repeat_kv copy), which keeps all of it.
  v_in_qkv = 1ull << 36,
  // GPT-2 under autocast (forward_in_program_order): the layer's forward as the recorded allocator histories
  // show it, op by op (forward_moment rows and per-module weight casts), or the coarser rows it replaces.
  fwd_program = 1ull << 37, coarse_forward = 1ull << 38,
  // SDPA's output is a tensor of its own, not the storage o_proj's input shares: cuDNN and FlashAttention
  // lay the output out as q is (MHA.cpp's alloc_with_matching_layout; empty_like), and Phi-3's rotary
  // embedding ends in torch.cat, whose q is contiguous [b, a, s, d], so transpose(1, 2).contiguous() copies.
  sdpa_own_output = 1ull << 39,
  // A 16-bit model without autocast, op by op (fwd_program): no weight casts; RMSNorm's .to(float32) is a copy,
  // and the norm's output (weight * normed, in the model's dtype) is what the projections read and save.
  no_autocast = 1ull << 40,
  // Checkpointing such a model keeps the 16-bit layer input; the recomputation saves the fp32 copy beside it.
  upcast_copy = 1ull << 41,
  // Llama: the layer's input is a tensor of its own beside the norm's fp32 copy (a 16-bit model op by op, not
  // checkpointed: a bf16 Llama's history); otherwise (unless{norm_copies_input}) it is what its first RMSNorm saves:
  // autocast's fp32 residual stream, a checkpoint's kept input, or the coarse forward's stand-in.
  norm_copies_input = 1ull << 42,
  // peft on a Llama op by op (a 16-bit model, fp32 adapters: LoRA on a bf16 TinyLlama's histories): each adapted module's
  // steps one by one, with which of q, k and v it adapts; otherwise (unless{peft_per_module}) its buffers
  // lumped, as the coarse forward and GPT-2's one c_attn module have them.
  peft_q = 1ull << 43, peft_k = 1ull << 44, peft_v = 1ull << 45, peft_per_module = 1ull << 46,
  // Eager attention op by op (a 16-bit Llama's history; GPT-2's under autocast), and SDPA's math path
  // op by op (an fp32 Llama's history): the s x s steps one by one; otherwise (unless{eager_ops | math_ops}) the
  // one working buffer the other forwards count.
  eager_ops = 1ull << 47, math_ops = 1ull << 48,
  // A 16-bit model without autocast: RMSNorm's .to(float32) is a copy, x * rsqrt an fp32 temporary, and the
  // attention's residual sum a tensor the norm does not save (an fp32 model's norm reads and saves it as it is).
  norm_upcasts = 1ull << 49,
  // GPT-2's backward op by op, under autocast or in a 16-bit model (planner/profiles/hf/activations_hf_backward.hpp):
  // backward_moment rows and the event's steps; otherwise (unless{bwd_program}) the coarse working buffers.
  bwd_program = 1ull << 50,
  // embedding_dense_backward sorts the token ids and sums partial segments (more than 3072 tokens a micro-batch:
  // aten/src/ATen/native/cuda/Embedding.cu), in a buffer of its own.
  sorted_embedding_backward = 1ull << 51,
  // The flash-attn package (attn_implementation="flash_attention_2"): as SDPA's fused kernel it saves q, k, v,
  // its output and the fp32 log-sum-exp (lse_fused), and beside them its rng_state; its backward's workspaces,
  // with dk and dv computed per query head and summed per group where the key heads are fewer (flash_attn_gqa).
  flash_attn_pkg = 1ull << 52, flash_attn_gqa = 1ull << 53,
  // Packed documents under the flash-attn package: flash_attn_varlen_func, which also saves cu_seqlens.
  flash_attn_varlen = 1ull << 54,
  // torch.compile (--compile; planner/profiles/hf/hf_compile.hpp): the layer is one graph whose min-cut partitioner
  // saves what no fused kernel can recompute, and whose fused kernels write only their outputs. Eager rows the
  // compiled graph neither saves nor makes say unless{compiled}; the compiled graph's own rows say compiled.
  compiled = 1ull << 55,
  // Markers, not conditions (always among a run's bits, as input_grad is): the row is the output of one of the
  // layer's aten.mm calls, or of SDPA's kernel (its output and log-sum-exp). torchtitan's per-op policy
  // (--recompute selective: planner/run/selective_checkpoint.hpp) keeps the attention's and every odd mm's,
  // counted through the rows in program order, from the layer's forward to its backward.
  mm_output = 1ull << 56, attention_output = 1ull << 57,
  // A stack whose attention copies the grouped keys and values out to every query head before SDPA
  // (stack_traits::expands_kv_heads, torchtune's MultiHeadAttention): SDPA saves the q-wide copies, and the
  // grouped tensors they were copied from live only until the copies exist.
  kv_expanded = 1ull << 58,
};

// A row's condition: every bit it names holds, and none of those written `unless{...}`
// (`llama | fwd_program | unless{norms_train}`).
struct unless {
  std::uint64_t bits;
};
struct condition {
  std::uint64_t all = 0, none = 0;
  constexpr condition(std::uint64_t all_bits = 0, std::uint64_t none_bits = 0) : all(all_bits), none(none_bits) {}
  constexpr condition(unless u) : none(u.bits) {}  // unless{x} alone: whenever x does not hold
  constexpr bool applies(std::uint64_t holds) const { return (all & holds) == all && (none & holds) == 0; }
};
constexpr condition operator|(std::uint64_t all, unless u) { return {all, u.bits}; }

struct hf_row {
  std::string_view name;
  shape_rule shape;
  dtype_role type;
  keep_class keep;
  condition when;
  // A forward_moment's free point: the row whose allocation ends the variable holding it, else or_until
  // (when `until` does not apply); "@output": once the layer's output exists (a variable the decoder layer's
  // forward holds until it returns). Neither applying: freed at the next buffer that outlives the event. A
  // saved row's: where its checkpointed forward, which saves nothing, frees it (fwd_program only).
  std::string_view until = {}, or_until = {};
};

// A row's free point names a later row of its table (or "@output"). The index of the first row whose `until`
// or `or_until` names no row after it, or -1 (activations_hf.cpp asserts -1 for every table when it compiles).
template <std::size_t N>
constexpr int unresolved_free_point(const hf_row (&rows)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    for (const std::string_view target : {rows[i].until, rows[i].or_until}) {
      if (target.empty() || target == "@output") continue;
      bool found = false;
      for (std::size_t j = i + 1; j < N && !found; ++j) found = rows[j].name == target;
      if (!found) return static_cast<int>(i);
    }
  return -1;
}

}  // namespace trainplan::hf_rows
