#pragma once
// The hf profile's rows (planner/profiles/hf/activations_hf_rows.hpp): the attention between its projections: rotary embedding, multi-head latent attention's projections,
// the attention core by backend (SDPA, eager, the math path), the residual add and GPT-2's dropout.
#include "planner/profiles/hf/activations_hf_row_rules.hpp"

namespace trainplan::hf_rows {

// A Llama's rotary embedding on q and k (apply_rotary_pos_emb), op by op.
// (Compiled, hf_compile.hpp: each rotation is one fused pointwise kernel that writes only the rotated tensor, which
// SDPA's backward reads: saved as eager's is, from q's and k's GEMM outputs, which live until it is written.)
constexpr hf_row rotary_rows[] = {
    // apply_rotary_pos_emb: q * cos + rotate_half(q) * sin, with cos and sin in the model's dtype (fp32 under
    // autocast), so the products are fp32; rotate_half is cat(-x2, x1) in q's dtype. Each step freed once the
    // next exists; the rotated q and k live until self_attn returns.
    {"layer{}.fwd.q_cos", shape_rule::bs_q, dtype_role::param, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.fwd.q_embed", "layer{}.attn.q_rope"},
    {"layer{}.fwd.q_neg_half", shape_rule::bs_q_half, dtype_role::compute, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.fwd.q_cat"},
    {"layer{}.fwd.q_cat", shape_rule::bs_q, dtype_role::compute, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.fwd.q_sin"},
    {"layer{}.fwd.q_sin", shape_rule::bs_q, dtype_role::param, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.fwd.q_embed", "layer{}.attn.q_rope"},
    {"layer{}.fwd.q_embed", shape_rule::bs_q, dtype_role::param, keep_class::forward_moment, llama | fwd_program | amp | unless{compiled},
     "layer{}.fwd.attn_proj_out"},
    // (A 16-bit model: the rotated q is what SDPA saves.)
    {"layer{}.attn.q_rope", shape_rule::bs_q, dtype_role::compute, keep_class::saved,
     llama | fwd_program | no_autocast | sdpa_saves_qkv, "layer{}.fwd.attn_proj_out"},
    // (Eager attention saves copies of its own: the rotated q and k, and v, live until o_proj has run.)
    {"layer{}.fwd.q_embed", shape_rule::bs_q, dtype_role::param, keep_class::forward_moment,
     llama | fwd_program | no_autocast | attn_copies, "layer{}.fwd.attn_proj_out"},
    {"layer{}.fwd.k_cos", shape_rule::bs_kv, dtype_role::param, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.fwd.k_embed", "layer{}.attn.k_rope"},
    {"layer{}.fwd.k_neg_half", shape_rule::bs_kv_half, dtype_role::compute, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.fwd.k_cat"},
    {"layer{}.fwd.k_cat", shape_rule::bs_kv, dtype_role::compute, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.fwd.k_sin"},
    {"layer{}.fwd.k_sin", shape_rule::bs_kv, dtype_role::param, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.fwd.k_embed", "layer{}.attn.k_rope"},
    {"layer{}.fwd.k_embed", shape_rule::bs_kv, dtype_role::param, keep_class::forward_moment, llama | fwd_program | amp | unless{compiled},
     "layer{}.fwd.attn_proj_out"},
    {"layer{}.attn.k_rope", shape_rule::bs_kv, dtype_role::compute, keep_class::saved,
     llama | fwd_program | no_autocast | sdpa_saves_qkv | unless{kv_expanded}, "layer{}.fwd.attn_proj_out"},
    // (kv_expanded, torchtune's MultiHeadAttention: the rotated k, [b, s, kv, d], is viewed, expanded to every query
    // head and reshaped, a q-wide copy SDPA saves; the grouped tensor is freed once the copy exists. Compiled, the
    // rotation and the copy are one fused kernel that writes only the copy.)
    {"layer{}.fwd.k_embed", shape_rule::bs_kv, dtype_role::compute, keep_class::forward_moment,
     llama | fwd_program | no_autocast | kv_expanded | unless{compiled}, "layer{}.attn.k_rope"},
    {"layer{}.attn.k_rope", shape_rule::bs_q, dtype_role::compute, keep_class::saved,
     llama | fwd_program | no_autocast | sdpa_saves_qkv | kv_expanded, "layer{}.fwd.attn_proj_out"},
    {"layer{}.fwd.k_embed", shape_rule::bs_kv, dtype_role::param, keep_class::forward_moment,
     llama | fwd_program | no_autocast | attn_copies, "layer{}.fwd.attn_proj_out"},
    // SDPA casts its arguments right to left: k's bf16 copy, then q's (v is bf16 already); it saves both.
    {"layer{}.attn.k_rope", shape_rule::bs_kv, dtype_role::compute, keep_class::saved, llama | fwd_program | amp, "layer{}.attn.out_in"},
    {"layer{}.attn.q_rope", shape_rule::bs_q, dtype_role::compute, keep_class::saved, llama | fwd_program | amp, "layer{}.attn.out_in"},
};

// Multi-head latent attention's projections and latent norms (DeepSeek).
constexpr hf_row mla_projection_rows[] = {
    // Multi-head latent attention (transformers' DeepseekV3Attention): q_a_layernorm and kv_a_layernorm are
    // RMSNorms over the down projections' 16-bit outputs (the fp32 upcast, rsqrt and the normalised tensor
    // saved), and q_b_proj and kv_b_proj read their outputs (cast by autocast, or the weight product).
    // SDPA's value is a view of kv_b_proj's output, which it keeps whole (the non-RoPE keys beside the
    // values); the rotated queries and keys are concatenations, saved as below.
    {"layer{}.attn.q_a_norm.in", shape_rule::bs_qr, dtype_role::fp32, keep_class::saved, mla | mla_q_lora},
    {"layer{}.attn.q_a_norm.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, mla | mla_q_lora},
    {"layer{}.attn.q_a_norm.normed", shape_rule::bs_qr, dtype_role::compute, keep_class::saved, mla | mla_q_lora},
    {"layer{}.attn.q_b_in", shape_rule::bs_qr, dtype_role::compute, keep_class::saved, mla | mla_q_lora | trains_qkv},
    {"layer{}.attn.kv_a_norm.in", shape_rule::bs_kvr, dtype_role::fp32, keep_class::saved, mla},
    {"layer{}.attn.kv_a_norm.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, mla},
    {"layer{}.attn.kv_a_norm.normed", shape_rule::bs_kvr, dtype_role::compute, keep_class::saved, mla},
    {"layer{}.attn.kv_b_in", shape_rule::bs_kvr, dtype_role::compute, keep_class::saved, mla | trains_qkv},
    {"layer{}.attn.kv_b_out", shape_rule::bs_kvb, dtype_role::compute, keep_class::saved, mla},
};

// The attention core: SDPA by backend, or eager attention and SDPA's math path; the attention output.
constexpr hf_row attention_rows[] = {
    // SDPA with a fused or memory-efficient kernel saves q, k, v (GPT-2: all of c_attn's output; Llama: q and
    // k after rotary embedding, v as projected), its output, and the log-sum-exp.
    {"layer{}.attn.qkv", shape_rule::bs_qkv, dtype_role::compute, keep_class::saved, gpt | sdpa_saves_qkv,
     "layer{}.fwd.attn_out", "@output"},
    // Eager attention saves its own copies; c_attn's output lives on in the q, k, v views GPT2Attention.forward
    // holds until it returns, after its resid_dropout.
    {"layer{}.fwd.qkv_out", shape_rule::bs_qkv, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | attn_copies,
     "layer{}.fwd.attn_out", "@output"},
    {"layer{}.attn.qkv", shape_rule::bs_qkv, dtype_role::compute, keep_class::saved, llama | sdpa_saves_qkv | v_in_qkv},
    {"layer{}.attn.q_rope", shape_rule::bs_q, dtype_role::compute, keep_class::saved, llama | sdpa_saves_qkv | coarse_forward},
    {"layer{}.attn.k_rope", shape_rule::bs_kv_sdpa, dtype_role::compute, keep_class::saved, llama | sdpa_saves_qkv | coarse_forward},
    {"layer{}.attn.v", shape_rule::bs_kv_sdpa, dtype_role::compute, keep_class::saved,
     llama | sdpa_saves_qkv | gqa_values | coarse_forward},
    {"layer{}.attn.lse", shape_rule::bas, dtype_role::fp32, keep_class::saved, lse_fused | attention_output},
    {"layer{}.attn.lse", shape_rule::bas32, dtype_role::fp32, keep_class::saved, lse_efficient | attention_output},
    // The flash-attn package (flash_attn_interface.py, FlashAttnFunc: save_for_backward(q, k, v, out_padded,
    // softmax_lse, rng_state)): its softmax_lse is [b, a, s] fp32 as above; rng_state a 2-element int64 GPU
    // tensor (mha_fwd). Its backward's workspaces (mha_bwd): softmax_d, the fp32 dq accumulator, and with
    // grouped heads dk and dv per query head ([b, s, a, d] each) before their sum over each group.
    {"layer{}.attn.rng_state", shape_rule::rng_state, dtype_role::index, keep_class::saved, flash_attn_pkg},
    // Packed documents (--packing): transformers' _flash_attention_forward finds them from position_ids
    // (modeling_flash_attention_utils.py: _is_packed_sequence, prepare_fa_kwargs_from_position_ids: cu_seq_lens_q,
    // an int32 [n + 1] vector, cu_seq_lens_k the same tensor) and calls flash_attn_varlen_func, whose
    // FlashAttnVarlenFunc saves q, k, v, out, softmax_lse ([a, total tokens] fp32: the bytes of [b, a, s]),
    // cu_seqlens_q, cu_seqlens_k and rng_state (flash_attn_interface.py); one vector per layer, made in it.
    {"layer{}.attn.cu_seqlens", shape_rule::cu_seqlens, dtype_role::index32, keep_class::saved, flash_attn_varlen},
    {"layer{}.bwd.fa_softmax_d", shape_rule::fa_softmax_d, dtype_role::fp32, keep_class::backward_moment, flash_attn_pkg},
    {"layer{}.bwd.fa_dq_accum", shape_rule::fa_dq_accum, dtype_role::fp32, keep_class::backward_moment, flash_attn_pkg},
    {"layer{}.bwd.fa_dk_expanded", shape_rule::bs_q, dtype_role::compute, keep_class::backward_moment, flash_attn_gqa},
    {"layer{}.bwd.fa_dv_expanded", shape_rule::bs_q, dtype_role::compute, keep_class::backward_moment, flash_attn_gqa},
    // SDPA turns the bool mask into a bias in q's dtype, where(mask.logical_not(), -inf, 0) (attention.cpp,
    // convert_boolean_attn_mask; the logical_not a temporary), which the fused kernel saves for backward.
    {"layer{}.fwd.mask_not", shape_rule::b1ss, dtype_role::mask, keep_class::forward_working, sdpa_mask},
    {"layer{}.attn.mask_bias", shape_rule::b1ss, dtype_role::compute, keep_class::saved, sdpa_mask},
    // Eager attention (and SDPA's math path) multiplies contiguous copies: q, k^T and v, with k and v
    // repeated to every query head (repeat_kv); it keeps the probabilities, and the copy the second matmul
    // reads when that is a bf16 cast or the dropout's output.
    // SDPA's math path op by op (_scaled_dot_product_attention_math, an fp32 Llama with grouped heads: its
    // history): q * sqrt(scale); the causal mask built as ones(s, s).tril() and made an fp32 bias; k and v
    // repeated to every head (enable_gqa); k^T * sqrt(scale); bmm's copy of q; the scores, to which the bias is
    // added in place; _safe_softmax's output with its -inf test and row check, freed with the scores once it
    // has run; the product with v.
    {"layer{}.fwd.q_scaled", shape_rule::bs_q, dtype_role::compute, keep_class::forward_moment, math_ops, "layer{}.fwd.attn_pv"},
    {"layer{}.fwd.causal_ones", shape_rule::ss, dtype_role::mask, keep_class::forward_moment, math_ops, "layer{}.fwd.causal_tril"},
    {"layer{}.fwd.causal_tril", shape_rule::ss, dtype_role::mask, keep_class::forward_moment, math_ops, "layer{}.fwd.causal_bias"},
    {"layer{}.fwd.causal_bias", shape_rule::ss, dtype_role::compute, keep_class::forward_moment, math_ops, "layer{}.fwd.attn_pv"},
    {"layer{}.fwd.k_repeated", shape_rule::bs_q, dtype_role::compute, keep_class::forward_moment, math_ops, "layer{}.fwd.attn_pv"},
    {"layer{}.attn.v_rep", shape_rule::bs_q, dtype_role::compute, keep_class::saved, math_ops},
    {"layer{}.attn.k_t", shape_rule::bs_q, dtype_role::compute, keep_class::saved, math_ops},
    {"layer{}.attn.q", shape_rule::bs_q, dtype_role::compute, keep_class::saved, math_ops},
    {"layer{}.fwd.math_scores", shape_rule::bass, dtype_role::compute, keep_class::forward_moment, math_ops,
     "layer{}.fwd.safe_softmax_rows"},
    {"layer{}.attn.q", shape_rule::bs_q, dtype_role::compute, keep_class::saved, attn_copies | unless{math_ops}},
    {"layer{}.attn.k_t", shape_rule::bs_q, dtype_role::compute, keep_class::saved, attn_copies | unless{math_ops}},
    // (v's copy comes here, repeat_kv's, but where GPT-2's eager _attn op by op and the math path op by op make it.)
    {"layer{}.attn.v_rep", shape_rule::bs_q, dtype_role::compute, keep_class::saved,
     llama | attn_copies | gqa_values | unless{math_ops}},
    {"layer{}.attn.v_rep", shape_rule::bs_q, dtype_role::compute, keep_class::saved, gpt | attn_copies | gqa_values | unless{eager_ops}},
    // Gemma 2's eager attention caps the scores, cap * tanh(scores / cap): tanh saves its output.
    {"layer{}.attn.softcap_tanh", shape_rule::bass, dtype_role::compute, keep_class::saved, attn_probs | attn_softcap},
    // Eager and math attention build the s x s scores as tensors (q k^T, scaled, masked: one alive at a
    // time) while softmax writes its output. When softmax runs in fp32 on 16-bit scores (autocast, or
    // softmax(dtype=float32)) what it reads is an fp32 copy, and the 16-bit scores are already freed.
    {"layer{}.fwd.attn_scores", shape_rule::bass, dtype_role::compute, keep_class::forward_working,
     attn_probs | scores_same_dtype | unless{eager_ops | math_ops}},
    {"layer{}.fwd.attn_scores_fp32", shape_rule::bass, dtype_role::fp32, keep_class::forward_working,
     attn_probs | scores_upcast | unless{eager_ops | math_ops}},
    {"layer{}.fwd.attn_scores", shape_rule::bass, dtype_role::compute, keep_class::forward_estimate,
     attn_probs | scores_same_dtype | eager_ops},
    {"layer{}.fwd.attn_scores", shape_rule::bass, dtype_role::compute, keep_class::forward_estimate,
     attn_probs | scores_same_dtype | math_ops},
    {"layer{}.fwd.attn_scores_fp32", shape_rule::bass, dtype_role::fp32, keep_class::forward_estimate,
     attn_probs | scores_upcast | eager_ops},
    // A 16-bit Llama's eager_attention_forward op by op (a bf16 Llama's history): matmul(q, k^T), * scaling, + the mask,
    // each freed once the next exists (the masked scores once softmax's bf16 result does); softmax(dtype=float32)
    // reads an fp32 copy of them, freed once its output exists.
    {"layer{}.fwd.attn_mm", shape_rule::bass, dtype_role::compute, keep_class::forward_moment, eager_ops, "layer{}.fwd.attn_scaled"},
    {"layer{}.fwd.attn_scaled", shape_rule::bass, dtype_role::compute, keep_class::forward_moment, eager_ops,
     "layer{}.fwd.attn_masked"},
    {"layer{}.fwd.attn_masked", shape_rule::bass, dtype_role::compute, keep_class::forward_moment, llama | eager_ops,
     "layer{}.attn.probs_for_v"},
    {"layer{}.fwd.softmax_in", shape_rule::bass, dtype_role::fp32, keep_class::forward_moment, llama | eager_ops | scores_upcast,
     "layer{}.attn.probs"},
    // GPT-2's eager _attn under autocast (its recorded history): torch.where with the fp32 mask value promotes the
    // masked scores to fp32, which softmax reads as they are; its output is cast to the values' dtype, then
    // dropped out (the cast freed once the dropout's output exists).
    {"layer{}.fwd.attn_masked", shape_rule::bass, dtype_role::fp32, keep_class::forward_moment, gpt | eager_ops,
     "layer{}.attn.probs"},
    // SDPA's math path: _safe_softmax's bool mask of -inf scores (and its row reduction, [b,a,s,1]) is made
    // while the scores are alive; the softmax output is the saved probabilities, zeroed in place where a row
    // is all -inf. torch 2.11's recorded allocator history of an fp32 Llama (data/measurements/allocator-history-*)
    // shows per layer the scores, the softmax output and the 256 MiB mask, and no third [b,a,s,s] buffer.
    {"layer{}.fwd.safe_softmax_mask", shape_rule::bass, dtype_role::mask, keep_class::forward_working, math_path | unless{math_ops}},
    {"layer{}.attn.probs", shape_rule::bass, dtype_role::probs, keep_class::saved, attn_probs},
    {"layer{}.fwd.safe_softmax_mask", shape_rule::bass, dtype_role::mask, keep_class::forward_moment, math_ops,
     "layer{}.fwd.safe_softmax_rows"},
    {"layer{}.fwd.safe_softmax_rows", shape_rule::bas_rows, dtype_role::mask, keep_class::forward_moment, math_ops},
    {"layer{}.fwd.safe_softmax_mask", shape_rule::bass, dtype_role::mask, keep_class::forward_estimate, math_ops},
    // The backward of the matmul that reads the probabilities writes their gradient, and softmax's backward
    // the scores' (listed after the probabilities: the replay walks a layer's backward in reverse order).
    {"layer{}.bwd.d_probs", shape_rule::bass, dtype_role::fp32, keep_class::backward_working, attn_probs},
    // Softmax's backward writes the scores' gradient while the probabilities' gradient is still alive (the
    // 16-bit copies of either exist only before or after that moment).
    {"layer{}.bwd.d_scores", shape_rule::bass, dtype_role::fp32, keep_class::backward_working, attn_probs},
    // SDPA's math path: a third [b,a,s,s] buffer lives for a moment while both gradients above exist (made and
    // freed inside the softmax's backward, before the probabilities' gradient is released). torch 2.11's
    // recorded allocator history of an fp32 Llama shows it in every layer's backward: three 1 GiB blocks at once, the
    // reason PyTorch reserves a third 1 GiB segment there (data/measurements/allocator-history-*). By then
    // the layer's MLP buffers are freed, which the peak timeline's events cannot say: it is momentary.
    {"layer{}.bwd.softmax_grad_temp", shape_rule::bass, dtype_role::fp32, keep_class::backward_moment, math_path},
    // (Eager attention's softmax(dtype=float32) on a 16-bit Llama shows the same third buffer in its history.)
    {"layer{}.bwd.softmax_grad_temp", shape_rule::bass, dtype_role::fp32, keep_class::backward_moment, llama | eager_ops},
    {"layer{}.attn.probs_dropout_mask", shape_rule::bass, dtype_role::mask, keep_class::saved, attn_probs | dropout},
    {"layer{}.fwd.probs_cast", shape_rule::bass, dtype_role::compute, keep_class::forward_moment, gpt | eager_ops | dropout,
     "layer{}.attn.probs_for_v"},
    {"layer{}.attn.probs_for_v", shape_rule::bass, dtype_role::compute, keep_class::saved, attn_probs | probs_copy},
    {"layer{}.attn.v_rep", shape_rule::bs_q, dtype_role::compute, keep_class::saved, gpt | eager_ops},
    // matmul(probs, v)'s [b, a, s, d] output, until transpose(1, 2).contiguous() has copied it for o_proj.
    {"layer{}.fwd.attn_pv", shape_rule::bs_v, dtype_role::compute, keep_class::forward_moment, eager_ops, "layer{}.attn.out_in"},
    {"layer{}.fwd.attn_pv", shape_rule::bs_v, dtype_role::compute, keep_class::forward_moment, math_ops, "layer{}.attn.out_in"},
    // SDPA's output where it is not the output projection's input (Phi-3 on cuDNN: its recorded inventories,
    // data/measurements/, show ScaledDotProductCudnnAttentionBackward0's saved output of its own, 16 MiB a layer).
    {"layer{}.attn.out", shape_rule::bs_v, dtype_role::compute, keep_class::saved, sdpa_own_output},
    // The attention output, contiguous as the output projection reads it (elsewhere SDPA's output shares its
    // storage: the memory-efficient kernel writes [b, s, a, d], and Llama's q is a transposed [b, s, a, d]).
    {"layer{}.attn.out_in", shape_rule::bs_v, dtype_role::compute, keep_class::saved, attention_output, "layer{}.fwd.attn_proj_out"},
};

// The attention's residual add.
constexpr hf_row attention_residual_rows[] = {
    {"layer{}.fwd.attn_residual", shape_rule::bsh, dtype_role::param, keep_class::forward_moment,
     llama | fwd_program | norm_upcasts, "@output"},
};

// GPT-2's resid_dropout on the attention's output.
constexpr hf_row attention_dropout_rows[] = {
    {"layer{}.attn.dropout_mask", shape_rule::bsh, dtype_role::mask, keep_class::saved, gpt | dropout, "layer{}.fwd.attn_out"},
    {"layer{}.fwd.attn_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | dropout, "@output"},
};

}  // namespace trainplan::hf_rows
