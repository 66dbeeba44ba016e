#pragma once
// The hf profile's rows (planner/profiles/hf/activations_hf_rows.hpp): the attention's linear projections: q, k and v (with their peft adapters, per module and lumped)
// and the output projection.
#include "planner/profiles/hf/activations_hf_row_rules.hpp"

namespace trainplan::hf_rows {

// The query, key and value projections: a Llama's q_proj, k_proj and v_proj one by one (each with its own
// adapter, peft's modules op by op), GPT-2's one c_attn (Phi-3's qkv_proj).
constexpr hf_row qkv_projection_rows[] = {
    {"layer{}.attn.qkv_in", shape_rule::qkv_casts, dtype_role::compute, keep_class::saved,
     llama | fwd_program | no_autocast | trains_qkv | unless{compiled}, "layer{}.fwd.attn_proj_out"},
    // Compiled (hf_compile.hpp): the norm's output in the GEMMs' dtype, which q, k and v read (one cast under
    // autocast: the graph's common subexpressions are merged), is saved: the backward reads it in the weights'
    // gradients, GEMMs no kernel fuses into, so the partitioner never recomputes it (ban_if_materialized_backward).
    {"layer{}.attn.qkv_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | compiled, "layer{}.fwd.attn_proj_out"},
    // q, k and v each cast the norm's output (saved by their GEMMs) after their weight; q's and k's outputs live
    // until apply_rotary_pos_emb has made both rotated tensors, v's SDPA saves.
    {"layer{}.autocast.weights.q", shape_rule::w_q, dtype_role::compute, keep_class::autocast_cache,
     llama | fwd_program | amp | trains_all},
    {"layer{}.attn.q_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | fwd_program | amp | trains_qkv | unless{compiled},
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
    {"layer{}.fwd.q_out", shape_rule::bs_q, dtype_role::compute, keep_class::forward_moment, llama | fwd_program | mm_output,
     "layer{}.fwd.k_embed", "layer{}.attn.k_rope"},
    {"layer{}.autocast.weights.k", shape_rule::w_kv, dtype_role::compute, keep_class::autocast_cache,
     llama | fwd_program | amp | trains_all},
    {"layer{}.attn.k_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | fwd_program | amp | trains_qkv | unless{compiled},
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
    {"layer{}.fwd.k_out", shape_rule::bs_kv, dtype_role::compute, keep_class::forward_moment, llama | fwd_program | mm_output,
     "layer{}.fwd.k_embed", "layer{}.attn.k_rope"},
    {"layer{}.autocast.weights.v", shape_rule::w_kv, dtype_role::compute, keep_class::autocast_cache,
     llama | fwd_program | amp | trains_all},
    {"layer{}.attn.v_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | fwd_program | amp | trains_qkv | unless{compiled},
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
     llama | fwd_program | gqa_values | sdpa_saves_qkv | mm_output | unless{kv_expanded}, "layer{}.fwd.attn_proj_out"},
    // (kv_expanded, torchtune's MultiHeadAttention: v_proj's output is viewed, expanded to every query head and
    // reshaped, a q-wide copy SDPA saves, and freed once the copy exists.)
    {"layer{}.fwd.v_grouped", shape_rule::bs_kvw, dtype_role::compute, keep_class::forward_moment,
     llama | fwd_program | gqa_values | sdpa_saves_qkv | mm_output | kv_expanded, "layer{}.attn.v"},
    {"layer{}.attn.v", shape_rule::bs_q, dtype_role::compute, keep_class::saved,
     llama | fwd_program | gqa_values | sdpa_saves_qkv | kv_expanded, "layer{}.fwd.attn_proj_out"},
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
    {"layer{}.fwd.attn_proj_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, llama | fwd_program | mm_output,
     "layer{}.fwd.attn_residual", "layer{}.ln2.in"},
};

}  // namespace trainplan::hf_rows
