#pragma once
// The hf profile's rows: the buffers each operation of a decoder layer makes, one table per operation, each
// row a name, shape rule, dtype role, keep class and the conditions it applies under
// (planner/profiles/hf/activations_hf_row_rules.hpp). The layer's operations in program order, each with its
// rows and its kernels, are the op lists of planner/profiles/hf/hf_layer_ops.cpp, the one file that includes
// this: walking a family's list gives the layer's buffers in the order the forward creates them (a backward
// working buffer beside what its backward reads), the order in which the allocator replay
// (planner/allocator/allocator_trace.cpp) allocates and frees within an event. A table may serve both
// families (GPT-2's and the Llama family's rows are told apart by their conditions).
//
// Sources: the saved-tensor inventories (op, saved name, dtype, shape), and the modeling code they come from:
// transformers' GPT2Block/GPT2Attention/NewGELUActivation and LlamaDecoderLayer/LlamaRMSNorm/LlamaMLP/
// apply_rotary_pos_emb; PyTorch's autocast op lists (fp32: layer_norm, pow, softmax, log_softmax),
// derivatives.yaml (which inputs each backward saves) and, for the math path, _scaled_dot_product_attention_math
// (aten/src/ATen/native/transformers/attention.cpp).
#include "planner/profiles/hf/activations_hf_row_rules.hpp"

namespace trainplan::hf_rows {

// The first norm: GPT-2's ln_1 (LayerNorm), a Llama's input_layernorm (RMSNorm).
constexpr hf_row norm_1_rows[] = {
    // GPT-2: ln_1 (LayerNorm saves its input and fp32 mean/rstd), then c_attn reading a bf16 cast of ln_1's output.
    {"layer{}.ln1.in", shape_rule::bsh, dtype_role::norm_input, keep_class::layer_input, gpt | input_grad},
    {"layer{}.ln1.stats", shape_rule::two_bs, dtype_role::fp32, keep_class::saved, gpt | input_grad},
    // Llama: input_layernorm upcasts to fp32 and saves that, rsqrt(var + eps), and the normalized tensor
    // (which weight * normed saves for the weight's gradient only).
    {"layer{}.ln1.in", shape_rule::bsh, dtype_role::norm_input, keep_class::layer_input, llama | input_grad | unless{norm_copies_input}},
    {"layer{}.fwd.input", shape_rule::bsh, dtype_role::param, keep_class::layer_input_moment, llama | norm_copies_input},
    {"layer{}.ln1.in", shape_rule::bsh, dtype_role::fp32, keep_class::saved, llama | norm_copies_input | input_grad,
     "layer{}.fwd.ln1_x_rsqrt"},
    // Llama under autocast op by op (fwd_program; a Llama's recorded history under autocast): RMSNorm's pow(2) is freed once mean
    // has read it, and its fp32 output lives until self_attn returns (LlamaDecoderLayer reassigns hidden_states).
    {"layer{}.fwd.ln1_pow", shape_rule::bsh, dtype_role::fp32, keep_class::forward_moment, llama | fwd_program,
     "layer{}.ln1.rsqrt"},
    // (Under checkpointing the forward saves nothing: each saved row's `until` is where its variable dies, as
    // a checkpointed Mistral's recorded history shows; the norm's layer input is the checkpoint's.)
    {"layer{}.ln1.upcast", shape_rule::bsh, dtype_role::fp32, keep_class::saved, llama | upcast_copy | input_grad,
     "layer{}.fwd.ln1_x_rsqrt"},
    {"layer{}.ln1.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, llama | input_grad, "layer{}.fwd.ln1_x_rsqrt",
     "layer{}.ln1.normed"},
    // A 16-bit model (a bf16 Llama's histories, checkpointed and not): x * rsqrt is an fp32 temporary, its .to(bf16) the normalised
    // tensor saved, and weight * that the norm's output, which q, k and v read and save.
    {"layer{}.fwd.ln1_x_rsqrt", shape_rule::bsh, dtype_role::fp32, keep_class::forward_moment, llama | fwd_program | norm_upcasts,
     "layer{}.attn.qkv_in", "layer{}.fwd.ln1_out"},
    {"layer{}.ln1.normed", shape_rule::bsh, dtype_role::param, keep_class::saved, llama | norms_train, "layer{}.fwd.ln1_out",
     "layer{}.attn.qkv_in"},
    {"layer{}.fwd.ln1_normed", shape_rule::bsh, dtype_role::param, keep_class::forward_moment,
     llama | fwd_program | norm_upcasts | unless{norms_train}, "layer{}.fwd.ln1_out"},
    {"layer{}.fwd.ln1_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, llama | fwd_program | amp,
     "layer{}.fwd.attn_proj_out"},
    // (Under LoRA the frozen q, k and v save no input: the norm's output lives until self_attn returns.)
    {"layer{}.fwd.ln1_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, llama | fwd_program | no_autocast | peft,
     "layer{}.fwd.attn_proj_out"},
    // GPT-2's forward under autocast, op by op (fwd_program; the recorded allocator histories of GPT-2, fully and with LoRA,
    // data/measurements/allocator-history-*, show each of these blocks made and freed in this order): ln_1's
    // fp32 output lives until the attention's residual add reassigns hidden_states (GPT2Block.forward);
    // c_attn's weight is cast where its GEMM runs (cached if it trains, cast anew if frozen).
    // (Without autocast, a bf16 and an fp32 GPT-2's histories: ln_1's output is what c_attn saves; no casts.)
    {"layer{}.fwd.ln1_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, gpt | fwd_program | amp,
     "layer{}.ln2.in"},
};

// The query, key and value projections: a Llama's q_proj, k_proj and v_proj one by one (each with its own
// adapter, peft's modules op by op), GPT-2's one c_attn (Phi-3's qkv_proj).
constexpr hf_row qkv_projection_rows[] = {
    {"layer{}.attn.qkv_in", shape_rule::qkv_casts, dtype_role::compute, keep_class::saved,
     llama | fwd_program | no_autocast | trains_qkv, "layer{}.fwd.attn_proj_out"},
    // q, k and v each cast the norm's output (saved by their GEMMs) after their weight; q's and k's outputs live
    // until apply_rotary_pos_emb has made both rotated tensors, v's SDPA saves.
    {"layer{}.autocast.weights.q", shape_rule::w_q, dtype_role::compute, keep_class::autocast_cache,
     llama | fwd_program | amp | trains_all},
    {"layer{}.attn.q_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | fwd_program | amp | trains_qkv,
     "layer{}.fwd.q_out"},
    // peft's lora.Linear.forward op by op on a 16-bit Llama (LoRA on a bf16 TinyLlama's histories, checkpointed and not): the frozen base's output,
    // the input's fp32 copy lora_A saves, lora_A's output lora_B saves, lora_B's fp32 output, its scaled copy
    // and the fp32 sum with the base's output (each freed once the next exists), then the sum cast back to
    // the model's dtype, the module's output. Under checkpointing the copy lives until that output exists.
    {"layer{}.fwd.q_base_out", shape_rule::bs_qw, dtype_role::compute, keep_class::forward_moment,
     llama | peft_per_module | peft_q, "layer{}.fwd.q_sum"},
    // With lora_dropout, lora_B(lora_A(dropout(x))): peft's fp32 copy x lives until the module returns (the
    // variable x of lora.Linear.forward), native_dropout makes its bool mask, then its output, which lora_A
    // saves (the mask saved for the dropout's backward where x needs a gradient, else freed once the output
    // exists: aten/src/ATen/native/cuda/Dropout.cu, dropout_cuda makes the mask first).
    {"layer{}.fwd.q_lora_x", shape_rule::bsh, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_q | peft_dropout, "layer{}.fwd.q_out"},
    {"layer{}.lora.q_dropout_mask", shape_rule::bsh, dtype_role::mask, keep_class::saved,
     llama | peft_per_module | peft_q | peft_dropout | input_grad, "layer{}.lora.q_in"},
    {"layer{}.lora.q_in", shape_rule::bsh, dtype_role::adapter_in, keep_class::saved, llama | peft_per_module | peft_q,
     "layer{}.fwd.q_out"},
    {"layer{}.lora.q_a_out", shape_rule::bs_r, dtype_role::adapter_in, keep_class::saved, llama | peft_per_module | peft_q,
     "layer{}.fwd.q_lora_b"},
    {"layer{}.fwd.q_lora_b", shape_rule::bs_qw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_q, "layer{}.fwd.q_scaled"},
    {"layer{}.fwd.q_scaled", shape_rule::bs_qw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_q, "layer{}.fwd.q_sum"},
    {"layer{}.fwd.q_sum", shape_rule::bs_qw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_q, "layer{}.fwd.q_out"},
    {"layer{}.fwd.q_out", shape_rule::bs_q, dtype_role::compute, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.k_embed", "layer{}.attn.k_rope"},
    {"layer{}.autocast.weights.k", shape_rule::w_kv, dtype_role::compute, keep_class::autocast_cache,
     llama | fwd_program | amp | trains_all},
    {"layer{}.attn.k_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | fwd_program | amp | trains_qkv,
     "layer{}.fwd.k_out"},
    {"layer{}.fwd.k_base_out", shape_rule::bs_kvw, dtype_role::compute, keep_class::forward_moment,
     llama | peft_per_module | peft_k, "layer{}.fwd.k_sum"},
    {"layer{}.fwd.k_lora_x", shape_rule::bsh, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_k | peft_dropout, "layer{}.fwd.k_out"},
    {"layer{}.lora.k_dropout_mask", shape_rule::bsh, dtype_role::mask, keep_class::saved,
     llama | peft_per_module | peft_k | peft_dropout | input_grad, "layer{}.lora.k_in"},
    {"layer{}.lora.k_in", shape_rule::bsh, dtype_role::adapter_in, keep_class::saved, llama | peft_per_module | peft_k,
     "layer{}.fwd.k_out"},
    {"layer{}.lora.k_a_out", shape_rule::bs_r, dtype_role::adapter_in, keep_class::saved, llama | peft_per_module | peft_k,
     "layer{}.fwd.k_lora_b"},
    {"layer{}.fwd.k_lora_b", shape_rule::bs_kvw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_k, "layer{}.fwd.k_scaled"},
    {"layer{}.fwd.k_scaled", shape_rule::bs_kvw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_k, "layer{}.fwd.k_sum"},
    {"layer{}.fwd.k_sum", shape_rule::bs_kvw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_k, "layer{}.fwd.k_out"},
    {"layer{}.fwd.k_out", shape_rule::bs_kv, dtype_role::compute, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.k_embed", "layer{}.attn.k_rope"},
    {"layer{}.autocast.weights.v", shape_rule::w_kv, dtype_role::compute, keep_class::autocast_cache,
     llama | fwd_program | amp | trains_all},
    {"layer{}.attn.v_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | fwd_program | amp | trains_qkv,
     "layer{}.attn.v"},
    {"layer{}.fwd.v_base_out", shape_rule::bs_kvw, dtype_role::compute, keep_class::forward_moment,
     llama | peft_per_module | peft_v, "layer{}.fwd.v_sum"},
    {"layer{}.fwd.v_lora_x", shape_rule::bsh, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_v | peft_dropout, "layer{}.attn.v"},
    {"layer{}.lora.v_dropout_mask", shape_rule::bsh, dtype_role::mask, keep_class::saved,
     llama | peft_per_module | peft_v | peft_dropout | input_grad, "layer{}.lora.v_in"},
    {"layer{}.lora.v_in", shape_rule::bsh, dtype_role::adapter_in, keep_class::saved, llama | peft_per_module | peft_v,
     "layer{}.attn.v"},
    {"layer{}.lora.v_a_out", shape_rule::bs_r, dtype_role::adapter_in, keep_class::saved, llama | peft_per_module | peft_v,
     "layer{}.fwd.v_lora_b"},
    {"layer{}.fwd.v_lora_b", shape_rule::bs_kvw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_v, "layer{}.fwd.v_scaled"},
    {"layer{}.fwd.v_scaled", shape_rule::bs_kvw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_v, "layer{}.fwd.v_sum"},
    {"layer{}.fwd.v_sum", shape_rule::bs_kvw, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_v, "layer{}.attn.v"},
    {"layer{}.attn.v", shape_rule::bs_kv, dtype_role::compute, keep_class::saved,
     llama | fwd_program | gqa_values | sdpa_saves_qkv, "layer{}.fwd.attn_proj_out"},
    {"layer{}.fwd.v_out", shape_rule::bs_kv, dtype_role::compute, keep_class::forward_moment, llama | fwd_program | attn_copies,
     "layer{}.fwd.attn_proj_out"},
    {"layer{}.autocast.weights.qkv", shape_rule::w_qkv, dtype_role::compute, keep_class::autocast_cache,
     gpt | fwd_program | amp | trains_all},
    // (A frozen GEMM saves its weight's copy only for its input's gradient: not layer 0's c_attn under LoRA
    // without checkpointing, whose copy is freed once the GEMM has run.)
    {"layer{}.autocast.frozen_weights.qkv", shape_rule::w_qkv, dtype_role::compute, keep_class::frozen_cast,
     gpt | fwd_program | peft | input_grad},
    {"layer{}.attn.qkv_in", shape_rule::qkv_casts, dtype_role::compute, keep_class::saved, gpt | trains_qkv, "layer{}.attn.qkv"},
    {"layer{}.attn.qkv_in", shape_rule::qkv_casts, dtype_role::compute, keep_class::saved, llama | trains_qkv | coarse_forward},
    // A frozen c_attn's GEMM reads a bf16 cast it does not save. Under a LoRA adapter its output is a
    // temporary: peft's lora.Linear.forward computes result = base(x), then result + lora_B(lora_A(x)) * scaling
    // (lora_B's output, the scaled copy, the sum: each freed once the next exists). The sum is what SDPA reads.
    {"layer{}.fwd.qkv_base_in", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft,
     "layer{}.fwd.qkv_base_out", "layer{}.attn.qkv"},
    {"layer{}.fwd.qkv_base_out", shape_rule::bs_qkv, dtype_role::compute, keep_class::forward_moment,
     gpt | fwd_program | peft_qkv, "layer{}.attn.qkv"},
};

// peft's adapters on the q, k, v projections, lumped (GPT-2's one c_attn module, and a Llama's adapters where its
// forward is not written op by op).
constexpr hf_row qkv_adapter_rows[] = {
    // peft's lora.Linear.forward: the frozen base layer saves no input; x = _cast_input_dtype(x, fp32
    // adapters), then lora_B(lora_A(x)): lora_A saves its input (autocast's copy, or peft's fp32 copy, per
    // module), lora_B lora_A's [b, s, r] output (peft/tuners/lora/layer.py, Linear.forward).
    // With lora_dropout, lora_B(lora_A(dropout(x))): nn.Dropout's native_dropout saves its bool mask (only where
    // x needs a gradient: not layer 0's without checkpointing), and lora_A the dropped-out input.
    // (A Llama's lumped adapters are not written op by op: their saved rows need no free point.)
    {"layer{}.lora.qkv_dropout_mask", shape_rule::peft_qkv_in, dtype_role::mask, keep_class::saved,
     gpt | peft_qkv | peft_dropout | input_grad, "layer{}.fwd.qkv_dropout_out"},
    {"layer{}.lora.qkv_dropout_mask", shape_rule::peft_qkv_in, dtype_role::mask, keep_class::saved,
     llama | peft_qkv | peft_dropout | input_grad | unless{peft_per_module}},
    // GPT-2 under autocast: the dropout's fp32 output, of which lora_A's GEMM saves autocast's bf16 cast, held by
    // the expression until lora_A returns.
    {"layer{}.fwd.qkv_dropout_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment,
     gpt | fwd_program | peft_qkv | peft_dropout, "layer{}.lora.qkv_a_out"},
    // Under autocast each adapter's GEMM casts the fp32 adapter (a leaf that requires grad: cached until the
    // forward ends) and saves the copy to compute its input's gradient, which layer 0's lora_A on q, k and v
    // never needs without checkpointing (LoRA's recorded inventories on GPT-2 and TinyLlama, data/measurements/: lora_A's [768, 8]
    // saved 35 times in 12 layers of 3 such modules, lora_B's all 12).
    {"layer{}.autocast.adapter_weights.qkv_a", shape_rule::lora_w_qkv_a, dtype_role::compute, keep_class::autocast_cache,
     amp | peft_qkv | input_grad},
    {"layer{}.lora.qkv_in", shape_rule::peft_qkv_in, dtype_role::adapter_in, keep_class::saved, peft_qkv | unless{peft_per_module}},
    {"layer{}.lora.qkv_a_out", shape_rule::peft_qkv_a, dtype_role::adapter_in, keep_class::saved, peft_qkv | unless{peft_per_module}},
    {"layer{}.autocast.adapter_weights", shape_rule::lora_w_rest, dtype_role::compute, keep_class::autocast_cache, amp | peft},
    {"layer{}.fwd.qkv_lora_b", shape_rule::bs_qkv, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_qkv,
     "layer{}.fwd.qkv_scaled"},
    {"layer{}.fwd.qkv_scaled", shape_rule::bs_qkv, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_qkv,
     "layer{}.attn.qkv"},
};

// A Llama's rotary embedding on q and k (apply_rotary_pos_emb), op by op.
constexpr hf_row rotary_rows[] = {
    // apply_rotary_pos_emb: q * cos + rotate_half(q) * sin, with cos and sin in the model's dtype (fp32 under
    // autocast), so the products are fp32; rotate_half is cat(-x2, x1) in q's dtype. Each step freed once the
    // next exists; the rotated q and k live until self_attn returns.
    {"layer{}.fwd.q_cos", shape_rule::bs_q, dtype_role::param, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.q_embed", "layer{}.attn.q_rope"},
    {"layer{}.fwd.q_neg_half", shape_rule::bs_q_half, dtype_role::compute, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.q_cat"},
    {"layer{}.fwd.q_cat", shape_rule::bs_q, dtype_role::compute, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.q_sin"},
    {"layer{}.fwd.q_sin", shape_rule::bs_q, dtype_role::param, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.q_embed", "layer{}.attn.q_rope"},
    {"layer{}.fwd.q_embed", shape_rule::bs_q, dtype_role::param, keep_class::forward_moment, llama | fwd_program | amp,
     "layer{}.fwd.attn_proj_out"},
    // (A 16-bit model: the rotated q is what SDPA saves.)
    {"layer{}.attn.q_rope", shape_rule::bs_q, dtype_role::compute, keep_class::saved,
     llama | fwd_program | no_autocast | sdpa_saves_qkv, "layer{}.fwd.attn_proj_out"},
    // (Eager attention saves copies of its own: the rotated q and k, and v, live until o_proj has run.)
    {"layer{}.fwd.q_embed", shape_rule::bs_q, dtype_role::param, keep_class::forward_moment,
     llama | fwd_program | no_autocast | attn_copies, "layer{}.fwd.attn_proj_out"},
    {"layer{}.fwd.k_cos", shape_rule::bs_kv, dtype_role::param, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.k_embed", "layer{}.attn.k_rope"},
    {"layer{}.fwd.k_neg_half", shape_rule::bs_kv_half, dtype_role::compute, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.k_cat"},
    {"layer{}.fwd.k_cat", shape_rule::bs_kv, dtype_role::compute, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.k_sin"},
    {"layer{}.fwd.k_sin", shape_rule::bs_kv, dtype_role::param, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.k_embed", "layer{}.attn.k_rope"},
    {"layer{}.fwd.k_embed", shape_rule::bs_kv, dtype_role::param, keep_class::forward_moment, llama | fwd_program | amp,
     "layer{}.fwd.attn_proj_out"},
    {"layer{}.attn.k_rope", shape_rule::bs_kv, dtype_role::compute, keep_class::saved,
     llama | fwd_program | no_autocast | sdpa_saves_qkv, "layer{}.fwd.attn_proj_out"},
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
    {"layer{}.attn.k_rope", shape_rule::bs_kv, dtype_role::compute, keep_class::saved, llama | sdpa_saves_qkv | coarse_forward},
    {"layer{}.attn.v", shape_rule::bs_kv, dtype_role::compute, keep_class::saved,
     llama | sdpa_saves_qkv | gqa_values | coarse_forward},
    {"layer{}.attn.lse", shape_rule::bas, dtype_role::fp32, keep_class::saved, lse_fused},
    {"layer{}.attn.lse", shape_rule::bas32, dtype_role::fp32, keep_class::saved, lse_efficient},
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
    {"layer{}.attn.out_in", shape_rule::bs_v, dtype_role::compute, keep_class::saved, 0, "layer{}.fwd.attn_proj_out"},
};

// The output projection (GPT-2's attn.c_proj, a Llama's o_proj), with its adapter.
constexpr hf_row out_projection_rows[] = {
    // The output projection, as c_attn above; an o adapter reads peft's fp32 cast of SDPA's bf16 output
    // (_cast_input_dtype), which lives until the module returns.
    {"layer{}.autocast.weights.o", shape_rule::w_o, dtype_role::compute, keep_class::autocast_cache, fwd_program | amp | trains_all},
    {"layer{}.autocast.frozen_weights.o", shape_rule::w_o, dtype_role::compute, keep_class::frozen_cast, fwd_program | amp | peft},
    {"layer{}.fwd.o_base_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_o,
     "layer{}.fwd.attn_proj_out"},
    {"layer{}.fwd.o_adapter_in", shape_rule::bs_o, dtype_role::fp32, keep_class::forward_moment, gpt | fwd_program | peft_o,
     "layer{}.fwd.attn_proj_out"},
    // An o adapter reads that output through a copy (peft's fp32 cast; under autocast, its bf16 recast).
    {"layer{}.lora.o_dropout_mask", shape_rule::bs_o, dtype_role::mask, keep_class::saved, gpt | peft_o | peft_dropout,
     "layer{}.fwd.o_dropout_out"},
    {"layer{}.lora.o_dropout_mask", shape_rule::bs_o, dtype_role::mask, keep_class::saved,
     llama | peft_o | peft_dropout | unless{peft_per_module}},
    {"layer{}.fwd.o_dropout_out", shape_rule::bs_o, dtype_role::param, keep_class::forward_moment,
     gpt | fwd_program | peft_o | peft_dropout, "layer{}.lora.o_a_out"},
    {"layer{}.lora.o_in", shape_rule::bs_o, dtype_role::adapter_in, keep_class::saved, peft_o | peft_copies | unless{peft_per_module}},
    {"layer{}.lora.o_a_out", shape_rule::bs_r, dtype_role::adapter_in, keep_class::saved, peft_o | unless{peft_per_module}},
    {"layer{}.fwd.o_lora_b", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_o,
     "layer{}.fwd.o_scaled"},
    {"layer{}.fwd.o_scaled", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_o,
     "layer{}.fwd.attn_proj_out"},
    // c_proj's output, until resid_dropout's output replaces it; that (the block's attn_output) lives until
    // the layer returns.
    {"layer{}.fwd.attn_proj_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program,
     "layer{}.fwd.attn_out", "@output"},
    // Llama's o_proj output, until the residual add (under autocast the fp32 sum ln2 saves; in a 16-bit model a
    // sum of its own, held until the layer returns).
    {"layer{}.fwd.o_base_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment,
     llama | peft_per_module | peft_o, "layer{}.fwd.o_sum"},
    {"layer{}.fwd.o_lora_x", shape_rule::bs_o, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_o | peft_dropout, "layer{}.fwd.attn_proj_out"},
    {"layer{}.lora.o_dropout_mask", shape_rule::bs_o, dtype_role::mask, keep_class::saved,
     llama | peft_per_module | peft_o | peft_dropout | input_grad, "layer{}.lora.o_in"},
    {"layer{}.lora.o_in", shape_rule::bs_o, dtype_role::adapter_in, keep_class::saved, llama | peft_per_module | peft_o,
     "layer{}.fwd.attn_proj_out"},
    {"layer{}.lora.o_a_out", shape_rule::bs_r, dtype_role::adapter_in, keep_class::saved, llama | peft_per_module | peft_o,
     "layer{}.fwd.o_lora_b"},
    {"layer{}.fwd.o_lora_b", shape_rule::bsh, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_o, "layer{}.fwd.o_scaled"},
    {"layer{}.fwd.o_scaled", shape_rule::bsh, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_o, "layer{}.fwd.o_sum"},
    {"layer{}.fwd.o_sum", shape_rule::bsh, dtype_role::adapter_in, keep_class::forward_moment,
     llama | peft_per_module | peft_o, "layer{}.fwd.attn_proj_out"},
    {"layer{}.fwd.attn_proj_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, llama | fwd_program,
     "layer{}.fwd.attn_residual", "layer{}.ln2.in"},
};

// Gemma 2's post-attention RMSNorm on the attention's output, before the residual add.
constexpr hf_row attention_post_norm_rows[] = {
    // Gemma2RMSNorm on o_proj's output: the fp32 upcast, rsqrt, and the fp32 normalised tensor that
    // (1 + weight) multiplies; the same after down_proj (transformers' Gemma2DecoderLayer).
    {"layer{}.attn.post_norm.in", shape_rule::bsh, dtype_role::fp32, keep_class::saved, post_norms},
    {"layer{}.attn.post_norm.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, post_norms},
    {"layer{}.attn.post_norm.normed", shape_rule::bsh, dtype_role::fp32, keep_class::saved, post_norms},
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

// The second norm: GPT-2's ln_2, a Llama's post_attention_layernorm.
constexpr hf_row norm_2_rows[] = {
    // Second norm and the MLP's input.
    {"layer{}.ln2.in", shape_rule::bsh, dtype_role::param, keep_class::saved, gpt, "@output"},
    {"layer{}.ln2.stats", shape_rule::two_bs, dtype_role::fp32, keep_class::saved, gpt},
    {"layer{}.ln2.in", shape_rule::bsh, dtype_role::fp32, keep_class::saved, llama, "layer{}.fwd.ln2_x_rsqrt", "@output"},
    {"layer{}.fwd.ln2_pow", shape_rule::bsh, dtype_role::fp32, keep_class::forward_moment, llama | fwd_program,
     "layer{}.ln2.rsqrt"},
    {"layer{}.ln2.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, llama, "layer{}.fwd.ln2_x_rsqrt",
     "layer{}.ln2.normed"},
    {"layer{}.fwd.ln2_x_rsqrt", shape_rule::bsh, dtype_role::fp32, keep_class::forward_moment, llama | fwd_program | norm_upcasts,
     "layer{}.mlp.fc_in", "layer{}.fwd.ln2_out"},
    {"layer{}.fwd.ln2_normed", shape_rule::bsh, dtype_role::param, keep_class::forward_moment,
     llama | fwd_program | norm_upcasts | unless{norms_train}, "layer{}.fwd.ln2_out"},
    {"layer{}.ln2.normed", shape_rule::bsh, dtype_role::param, keep_class::saved, llama | norms_train, "layer{}.fwd.ln2_out",
     "layer{}.mlp.fc_in"},
    // Llama: post_attention_layernorm's output, held until the MLP returns (in a 16-bit model what gate and up save).
    {"layer{}.fwd.ln2_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, llama | fwd_program | amp,
     "layer{}.fwd.down_out"},
    {"layer{}.fwd.ln2_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, llama | fwd_program | no_autocast | peft,
     "layer{}.fwd.down_out"},
    // GPT-2 under autocast: ln_2's fp32 output lives until the layer returns; c_fc as c_attn above.
    {"layer{}.fwd.ln2_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, gpt | fwd_program | amp, "@output"},
};

// A Llama's MLP input as gate and up (or the router) read it.
constexpr hf_row mlp_input_rows[] = {
    {"layer{}.mlp.fc_in", shape_rule::fc_casts, dtype_role::compute, keep_class::saved,
     llama | dense_mlp | fwd_program | no_autocast | trains_mlp, "layer{}.fwd.down_out"},
    {"layer{}.mlp.fc_in", shape_rule::fc_casts, dtype_role::compute, keep_class::saved, llama | trains_mlp | coarse_forward},
};

// GPT-2's mlp.c_fc, its base GEMM (its adapter: fc_adapter_rows; its output: c_fc_output_rows).
constexpr hf_row c_fc_rows[] = {
    {"layer{}.autocast.weights.fc", shape_rule::w_fc, dtype_role::compute, keep_class::autocast_cache,
     gpt | fwd_program | amp | trains_all},
    {"layer{}.autocast.frozen_weights.fc", shape_rule::w_fc, dtype_role::compute, keep_class::frozen_cast, gpt | fwd_program | peft},
    {"layer{}.mlp.fc_in", shape_rule::fc_casts, dtype_role::compute, keep_class::saved, gpt | trains_mlp, "layer{}.fwd.fc_out"},
    {"layer{}.fwd.fc_base_in", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft,
     "layer{}.fwd.fc_base_out", "layer{}.fwd.fc_out"},
    {"layer{}.fwd.fc_base_out", shape_rule::bsf, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_mlp,
     "layer{}.fwd.fc_out"},
};

// peft's adapters on the MLP's input projections (GPT-2's c_fc, a Llama's gate_proj and up_proj), lumped.
constexpr hf_row fc_adapter_rows[] = {
    {"layer{}.lora.fc_dropout_mask", shape_rule::peft_fc_in, dtype_role::mask, keep_class::saved, gpt | peft_mlp | peft_dropout,
     "layer{}.fwd.fc_dropout_out"},
    // (A Llama's: freed, where nothing saves it, once the dropped-out input lora_A saves exists.)
    {"layer{}.lora.fc_dropout_mask", shape_rule::peft_fc_in, dtype_role::mask, keep_class::saved, llama | peft_mlp | peft_dropout,
     "layer{}.lora.fc_in"},
    {"layer{}.fwd.fc_dropout_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment,
     gpt | fwd_program | peft_mlp | peft_dropout, "layer{}.lora.fc_a_out"},
    {"layer{}.lora.fc_in", shape_rule::peft_fc_in, dtype_role::adapter_in, keep_class::saved, peft_mlp},
    {"layer{}.lora.fc_a_out", shape_rule::peft_fc_a, dtype_role::adapter_in, keep_class::saved, peft_mlp},
    {"layer{}.fwd.fc_lora_b", shape_rule::bsf, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_mlp,
     "layer{}.fwd.fc_scaled"},
    {"layer{}.fwd.fc_scaled", shape_rule::bsf, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_mlp,
     "layer{}.fwd.fc_out"},
};

// GPT-2's c_fc output, made once its adapter (if any) has run.
constexpr hf_row c_fc_output_rows[] = {
    // c_fc's output: gelu's input x, held until gelu returns.
    {"layer{}.fwd.fc_out", shape_rule::bsf, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | amp,
     "layer{}.fwd.gelu_out"},
};

// GPT-2's gelu_new.
constexpr hf_row gelu_rows[] = {
    // (Without autocast c_fc's output is pow's saved input itself, and gelu's output what c_proj saves.)
    {"layer{}.mlp.gelu.pow_in", shape_rule::bsf, dtype_role::param, keep_class::saved, gpt | fwd_program | no_autocast,
     "layer{}.mlp.proj_in"},
    // GPT-2's gelu_new, 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))), as Python ops evaluated left to right:
    // 0.5*x first; pow saves x (an fp32 cast under autocast), tanh its result, the last mul both factors (0.5*x
    // in the GEMM dtype, 1 + tanh promoted to fp32); c_proj reads a cast of the fp32 result. Under fwd_program
    // the unsaved steps between pow and tanh are made and freed one by one (each freed once the next exists).
    {"layer{}.mlp.gelu.half_x", shape_rule::bsf, dtype_role::compute, keep_class::saved, gpt, "layer{}.fwd.gelu_out"},
    {"layer{}.mlp.gelu.pow_in", shape_rule::bsf, dtype_role::param, keep_class::saved, gpt | amp, "layer{}.fwd.gelu_cube"},
    {"layer{}.mlp.gelu.pow_in", shape_rule::bsf, dtype_role::param, keep_class::saved, gpt | no_autocast | coarse_forward,
     "layer{}.fwd.gelu_cube"},
    {"layer{}.fwd.gelu_cube", shape_rule::bsf, dtype_role::param, keep_class::forward_moment, gpt | fwd_program,
     "layer{}.fwd.gelu_cube_scaled"},
    {"layer{}.fwd.gelu_cube_scaled", shape_rule::bsf, dtype_role::param, keep_class::forward_moment, gpt | fwd_program,
     "layer{}.fwd.gelu_inner"},
    {"layer{}.fwd.gelu_inner", shape_rule::bsf, dtype_role::param, keep_class::forward_moment, gpt | fwd_program,
     "layer{}.fwd.gelu_inner_scaled"},
    {"layer{}.fwd.gelu_inner_scaled", shape_rule::bsf, dtype_role::param, keep_class::forward_moment, gpt | fwd_program,
     "layer{}.mlp.gelu.tanh"},
    {"layer{}.mlp.gelu.tanh", shape_rule::bsf, dtype_role::param, keep_class::saved, gpt, "layer{}.mlp.gelu.one_plus_tanh"},
    {"layer{}.mlp.gelu.one_plus_tanh", shape_rule::bsf, dtype_role::param, keep_class::saved, gpt, "layer{}.fwd.gelu_out"},
    // gelu's output, held until c_proj returns (GPT2MLP.forward reassigns hidden_states).
    {"layer{}.fwd.gelu_out", shape_rule::bsf, dtype_role::param, keep_class::forward_moment, gpt | fwd_program | amp,
     "layer{}.fwd.mlp_proj_out"},
};

// GPT-2's mlp.c_proj, with its adapter.
constexpr hf_row c_proj_rows[] = {
    {"layer{}.autocast.weights.proj", shape_rule::w_proj, dtype_role::compute, keep_class::autocast_cache,
     gpt | fwd_program | amp | trains_all},
    {"layer{}.autocast.frozen_weights.proj", shape_rule::w_proj, dtype_role::compute, keep_class::frozen_cast, gpt | fwd_program | peft},
    {"layer{}.mlp.proj_in", shape_rule::bsf, dtype_role::compute, keep_class::saved, gpt | trains_mlp, "layer{}.fwd.mlp_proj_out"},
    {"layer{}.fwd.proj_base_in", shape_rule::bsf, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft,
     "layer{}.fwd.proj_base_out", "layer{}.fwd.mlp_proj_out"},
    {"layer{}.fwd.proj_base_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_mlp,
     "layer{}.fwd.mlp_proj_out"},
    {"layer{}.lora.proj_dropout_mask", shape_rule::bsf, dtype_role::mask, keep_class::saved, gpt | peft_mlp | peft_dropout,
     "layer{}.fwd.proj_dropout_out"},
    {"layer{}.fwd.proj_dropout_out", shape_rule::bsf, dtype_role::param, keep_class::forward_moment,
     gpt | fwd_program | peft_mlp | peft_dropout, "layer{}.lora.proj_a_out"},
    {"layer{}.lora.proj_in", shape_rule::bsf, dtype_role::adapter_in, keep_class::saved, gpt | peft_mlp},
    {"layer{}.lora.proj_a_out", shape_rule::bs_r, dtype_role::adapter_in, keep_class::saved, gpt | peft_mlp},
    {"layer{}.fwd.proj_lora_b", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_mlp,
     "layer{}.fwd.proj_scaled"},
    {"layer{}.fwd.proj_scaled", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | peft_mlp,
     "layer{}.fwd.mlp_proj_out"},
    // c_proj's output, until the MLP's dropout replaces it; that lives until the layer returns.
    {"layer{}.fwd.mlp_proj_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program,
     "layer{}.fwd.mlp_out", "@output"},
};

// GPT-2's resid_dropout on the MLP's output.
constexpr hf_row mlp_dropout_rows[] = {
    {"layer{}.mlp.dropout_mask", shape_rule::bsh, dtype_role::mask, keep_class::saved, gpt | dropout, "layer{}.fwd.mlp_out"},
    {"layer{}.fwd.mlp_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, gpt | fwd_program | dropout, "@output"},
};

// A Llama's gate_proj (Phi-3's gate_up_proj).
constexpr hf_row gate_proj_rows[] = {
    // Llama's SwiGLU, down_proj(silu(gate_proj(x)) * up_proj(x)): silu saves its input, the mul both factors.
    // Phi-3's silu and mul save views of gate_up_proj's one output instead of gate and up.
    // Under fwd_program each projection casts its weight and (gate and up) the input where its GEMM runs;
    // down_proj's output lives until the residual add.
    {"layer{}.autocast.weights.gate", shape_rule::w_fc, dtype_role::compute, keep_class::autocast_cache,
     llama | dense_mlp | fwd_program | amp | trains_all},
    {"layer{}.mlp.gate_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | dense_mlp | fwd_program | amp | trains_mlp,
     "layer{}.mlp.gate"},
    {"layer{}.mlp.gate", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp | separate_proj, "layer{}.mlp.silu"},
    {"layer{}.mlp.gate_up", shape_rule::bs2f, dtype_role::compute, keep_class::saved, llama | dense_mlp | fused_proj},
};

// SwiGLU's silu on the gate.
constexpr hf_row silu_rows[] = {
    {"layer{}.mlp.silu", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp, "layer{}.mlp.down_in",
     "layer{}.fwd.mlp_product"},
};

// A Llama's up_proj.
constexpr hf_row up_proj_rows[] = {
    {"layer{}.autocast.weights.up", shape_rule::w_fc, dtype_role::compute, keep_class::autocast_cache,
     llama | dense_mlp | fwd_program | amp | trains_all},
    {"layer{}.mlp.up_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | dense_mlp | fwd_program | amp | trains_mlp,
     "layer{}.mlp.up"},
    {"layer{}.mlp.up", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp | separate_proj, "layer{}.mlp.down_in",
     "layer{}.fwd.mlp_product"},
};

// SwiGLU's product, silu(gate) * up.
constexpr hf_row product_rows[] = {
    // (A frozen down_proj saves no input: the product lives until down_proj's output exists.)
    {"layer{}.fwd.mlp_product", shape_rule::bsf, dtype_role::compute, keep_class::forward_moment,
     llama | dense_mlp | fwd_program | no_autocast | peft, "layer{}.fwd.down_out"},
};

// A Llama's down_proj, with its adapter.
constexpr hf_row down_proj_rows[] = {
    {"layer{}.mlp.down_in", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp | trains_mlp,
     "layer{}.fwd.down_out"},
    {"layer{}.autocast.weights.down", shape_rule::w_proj, dtype_role::compute, keep_class::autocast_cache,
     llama | dense_mlp | fwd_program | amp | trains_all},
    {"layer{}.fwd.down_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, llama | dense_mlp | fwd_program,
     "@output"},
    {"layer{}.lora.down_dropout_mask", shape_rule::bsf, dtype_role::mask, keep_class::saved,
     llama | dense_mlp | peft_mlp | peft_dropout},
    {"layer{}.lora.down_in", shape_rule::bsf, dtype_role::adapter_in, keep_class::saved, llama | dense_mlp | peft_mlp},
    {"layer{}.lora.down_a_out", shape_rule::bs_r, dtype_role::adapter_in, keep_class::saved, llama | dense_mlp | peft_mlp},
};

// Gemma 2's post-feedforward RMSNorm.
constexpr hf_row mlp_post_norm_rows[] = {
    {"layer{}.mlp.post_norm.in", shape_rule::bsh, dtype_role::fp32, keep_class::saved, post_norms},
    {"layer{}.mlp.post_norm.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, post_norms},
    {"layer{}.mlp.post_norm.normed", shape_rule::bsh, dtype_role::fp32, keep_class::saved, post_norms},
};

// What no one operation makes: autocast's weight copies lumped, and the working sets where the forward or
// backward is not written op by op.
constexpr hf_row layer_working_rows[] = {
    // Autocast's bf16 copies of the layer's GEMM weights (not parameters, so kept as activations are).
    {"layer{}.autocast.weights", shape_rule::matmul, dtype_role::compute, keep_class::autocast_cache,
     amp | trains_all | coarse_forward},
    // A frozen fp32 base under autocast (LoRA): autocast caches only casts of leaves that require grad
    // (aten/src/ATen/autocast_mode.cpp, cached_cast), so each GEMM casts its weight anew, and the GEMM's
    // backward keeps that copy to compute its input's gradient: not layer 0's q, k and v without
    // checkpointing, whose input needs none (LoRA on TinyLlama's inventory: q_proj's copy saved 21 times in 22 layers).
    {"layer{}.autocast.frozen_weights.qkv", shape_rule::w_qkv, dtype_role::compute, keep_class::frozen_cast,
     amp | peft | coarse_forward | input_grad},
    {"layer{}.autocast.frozen_weights", shape_rule::matmul_after_qkv, dtype_role::compute, keep_class::frozen_cast,
     amp | peft | coarse_forward},
    // Working sets (not measured by the inventories, which hold what outlives an op): the MLP's forward
    // temporaries, and in backward the residual gradient and the MLP's inner gradients.
    {"layer{}.fwd.mlp_temporaries", shape_rule::bsf, dtype_role::param, keep_class::forward_working, dense_mlp | coarse_forward},
    {"layer{}.fwd.mlp_temporaries", shape_rule::bsf, dtype_role::param, keep_class::forward_estimate, dense_mlp | fwd_program},
    // (Where the backward is op by op, planner/profiles/hf/activations_hf_backward.hpp, these count for the peak timeline alone.)
    {"layer{}.bwd.d_residual", shape_rule::bsh, dtype_role::param, keep_class::backward_working, 0 | unless{bwd_program}},
    {"layer{}.bwd.d_mlp", shape_rule::bsf, dtype_role::param, keep_class::backward_working, dense_mlp | unless{bwd_program}},
    {"layer{}.bwd.d_mlp_compute", shape_rule::bsf, dtype_role::compute, keep_class::backward_working,
     dense_mlp | separate_proj | unless{bwd_program}},
    {"layer{}.bwd.d_residual", shape_rule::bsh, dtype_role::param, keep_class::backward_estimate, bwd_program},
    {"layer{}.bwd.d_mlp", shape_rule::bsf, dtype_role::param, keep_class::backward_estimate, bwd_program},
    {"layer{}.bwd.d_mlp_compute", shape_rule::bsf, dtype_role::compute, keep_class::backward_estimate, bwd_program},
    // Phi-3: chunk's backward writes gate_up_proj's whole [b, s, 2f] output gradient.
    {"layer{}.bwd.d_mlp_compute", shape_rule::bs2f, dtype_role::compute, keep_class::backward_working, dense_mlp | fused_proj},
};

// A Mixture-of-Experts layer's rows, apart so that dense layers (most configurations of a sweep) do not
// walk them.
constexpr hf_row moe_rows[] = {
    // Mixture of Experts (transformers' MixtralSparseMoeBlock, Qwen2Moe/Qwen3MoeSparseMoeBlock): the router's
    // softmax(dtype=float32) saves its output; topk its indices; the renormalising division its fp32
    // operands. Each expert reads its tokens gathered by index (the indices saved), its fused gate_up GEMM
    // output is kept whole (silu reads a view of it), silu's output and the product the down GEMM reads are
    // saved, and so is the down output, which the routing weight multiplies. Summed over the experts, every
    // token appears k times: R = k*T rows (the loop is dropless; no capacity).
    {"layer{}.moe.router_probs", shape_rule::te, dtype_role::fp32, keep_class::saved, moe},
    {"layer{}.moe.topk_indices", shape_rule::tk, dtype_role::index, keep_class::saved, moe},
    {"layer{}.moe.topk_weights", shape_rule::tk, dtype_role::fp32, keep_class::saved, moe},
    {"layer{}.moe.token_index", shape_rule::r_1, dtype_role::index, keep_class::saved, moe},
    {"layer{}.moe.expert_in", shape_rule::r_h, dtype_role::compute, keep_class::saved, moe | trains_mlp},
    {"layer{}.moe.gate_up", shape_rule::r_2f, dtype_role::compute, keep_class::saved, moe},
    {"layer{}.moe.silu", shape_rule::r_f, dtype_role::compute, keep_class::saved, moe},
    {"layer{}.moe.down_in", shape_rule::r_f, dtype_role::compute, keep_class::saved, moe | trains_mlp},
    {"layer{}.moe.expert_out", shape_rule::r_h, dtype_role::compute, keep_class::saved, moe},
    // Qwen2-MoE's shared expert: a dense SwiGLU over every token, scaled by sigmoid(shared_expert_gate(x)).
    {"layer{}.moe.shared.gate", shape_rule::bs_fs, dtype_role::compute, keep_class::saved, shared_expert},
    {"layer{}.moe.shared.silu", shape_rule::bs_fs, dtype_role::compute, keep_class::saved, shared_expert},
    {"layer{}.moe.shared.up", shape_rule::bs_fs, dtype_role::compute, keep_class::saved, shared_expert},
    {"layer{}.moe.shared.down_in", shape_rule::bs_fs, dtype_role::compute, keep_class::saved, shared_expert | trains_mlp},
    {"layer{}.moe.shared.out", shape_rule::bsh, dtype_role::compute, keep_class::saved, shared_expert | shared_gate},
    {"layer{}.moe.shared.gate_sigmoid", shape_rule::bs_1, dtype_role::compute, keep_class::saved, shared_expert | shared_gate},
    // The same for the experts' rows, with the one-hot mask the expert loop walks (not saved).
    {"layer{}.fwd.expert_mask", shape_rule::ekt, dtype_role::index, keep_class::forward_working, moe},
    {"layer{}.fwd.moe_temporaries", shape_rule::r_h, dtype_role::param, keep_class::forward_working, moe},
    {"layer{}.bwd.d_expert", shape_rule::r_f, dtype_role::param, keep_class::backward_working, moe},
    {"layer{}.bwd.d_expert_compute", shape_rule::r_2f, dtype_role::compute, keep_class::backward_working, moe},
};

}  // namespace trainplan::hf_rows
