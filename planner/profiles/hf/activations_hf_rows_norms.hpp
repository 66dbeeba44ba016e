#pragma once
// The hf profile's rows (planner/profiles/hf/activations_hf_rows.hpp): the norms of a decoder layer: the first and second norm (GPT-2's LayerNorms, a Llama's RMSNorms)
// and Gemma 2's post-attention and post-feedforward norms.
#include "planner/profiles/hf/activations_hf_row_rules.hpp"

namespace trainplan::hf_rows {

// The first norm: GPT-2's ln_1 (LayerNorm), a Llama's input_layernorm (RMSNorm).
constexpr hf_row norm_1_rows[] = {
    // GPT-2: ln_1 (LayerNorm saves its input and fp32 mean/rstd), then c_attn reading a bf16 cast of ln_1's output.
    {"layer{}.ln1.in", shape_rule::bsh, dtype_role::norm_input, keep_class::layer_input, gpt | input_grad},
    {"layer{}.ln1.stats", shape_rule::two_bs, dtype_role::fp32, keep_class::saved, gpt | input_grad},
    // Llama: input_layernorm upcasts to fp32 and saves that, rsqrt(var + eps), and the normalized tensor
    // (which weight * normed saves for the weight's gradient only).
    {"layer{}.ln1.in", shape_rule::bsh, dtype_role::norm_input, keep_class::layer_input,
     llama | input_grad | unless{norm_copies_input | compiled}},
    {"layer{}.fwd.input", shape_rule::bsh, dtype_role::param, keep_class::layer_input_moment, llama | norm_copies_input | unless{compiled}},
    {"layer{}.ln1.in", shape_rule::bsh, dtype_role::fp32, keep_class::saved, llama | norm_copies_input | input_grad | unless{compiled},
     "layer{}.fwd.ln1_x_rsqrt"},
    // Compiled (hf_compile.hpp): the fp32 upcast is pointwise, recomputed in the backward from the layer's 16-bit input,
    // which the graph saves (a graph input: the cut's cheapest way to the backward; a checkpoint keeps it anyway).
    {"layer{}.ln1.in", shape_rule::bsh, dtype_role::param, keep_class::layer_input, llama | compiled | input_grad},
    // Llama under autocast op by op (fwd_program; a Llama's recorded history under autocast): RMSNorm's pow(2) is freed once mean
    // has read it, and its fp32 output lives until self_attn returns (LlamaDecoderLayer reassigns hidden_states).
    // (Compiled: pow, mean and rsqrt are one reduction kernel, which writes only the rsqrt.)
    {"layer{}.fwd.ln1_pow", shape_rule::bsh, dtype_role::fp32, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.ln1.rsqrt"},
    // (Under checkpointing the forward saves nothing: each saved row's `until` is where its variable dies, as
    // a checkpointed Mistral's recorded history shows; the norm's layer input is the checkpoint's.)
    {"layer{}.ln1.upcast", shape_rule::bsh, dtype_role::fp32, keep_class::saved, llama | upcast_copy | input_grad,
     "layer{}.fwd.ln1_x_rsqrt"},
    // (Compiled, saved too: a reduction whose output is far smaller than its input, which the partitioner never
    // recomputes: ban_if_reduction.)
    {"layer{}.ln1.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, llama | input_grad, "layer{}.fwd.ln1_x_rsqrt",
     "layer{}.ln1.normed"},
    // A 16-bit model (a bf16 Llama's histories, checkpointed and not): x * rsqrt is an fp32 temporary, its .to(bf16) the normalised
    // tensor saved, and weight * that the norm's output, which q, k and v read and save.
    {"layer{}.fwd.ln1_x_rsqrt", shape_rule::bsh, dtype_role::fp32, keep_class::forward_moment, llama | fwd_program | norm_upcasts,
     "layer{}.attn.qkv_in", "layer{}.fwd.ln1_out"},
    // (Compiled: the normalised tensor is pointwise from the saved input and rsqrt, recomputed for the weight's gradient.)
    {"layer{}.ln1.normed", shape_rule::bsh, dtype_role::param, keep_class::saved, llama | norms_train | unless{compiled},
     "layer{}.fwd.ln1_out", "layer{}.attn.qkv_in"},
    {"layer{}.fwd.ln1_normed", shape_rule::bsh, dtype_role::param, keep_class::forward_moment,
     llama | fwd_program | norm_upcasts | unless{norms_train}, "layer{}.fwd.ln1_out"},
    {"layer{}.fwd.ln1_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, llama | fwd_program | amp | unless{compiled},
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

// Gemma 2's post-attention RMSNorm on the attention's output, before the residual add.
constexpr hf_row attention_post_norm_rows[] = {
    // Gemma2RMSNorm on o_proj's output: the fp32 upcast, rsqrt, and the fp32 normalised tensor that
    // (1 + weight) multiplies; the same after down_proj (transformers' Gemma2DecoderLayer).
    {"layer{}.attn.post_norm.in", shape_rule::bsh, dtype_role::fp32, keep_class::saved, post_norms},
    {"layer{}.attn.post_norm.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, post_norms},
    {"layer{}.attn.post_norm.normed", shape_rule::bsh, dtype_role::fp32, keep_class::saved, post_norms},
};

// The second norm: GPT-2's ln_2, a Llama's post_attention_layernorm.
constexpr hf_row norm_2_rows[] = {
    // Second norm and the MLP's input.
    {"layer{}.ln2.in", shape_rule::bsh, dtype_role::param, keep_class::saved, gpt, "@output"},
    {"layer{}.ln2.stats", shape_rule::two_bs, dtype_role::fp32, keep_class::saved, gpt},
    {"layer{}.ln2.in", shape_rule::bsh, dtype_role::fp32, keep_class::saved, llama | unless{compiled}, "layer{}.fwd.ln2_x_rsqrt",
     "@output"},
    // Compiled: the residual sum in the model's dtype (the add and the norm's upcast fused; recomputing the sum would
    // need o_proj's output, as large), held as the layer's residual stream until its output exists.
    {"layer{}.ln2.in", shape_rule::bsh, dtype_role::param, keep_class::saved, llama | compiled, "@output"},
    {"layer{}.fwd.ln2_pow", shape_rule::bsh, dtype_role::fp32, keep_class::forward_moment, llama | fwd_program | unless{compiled},
     "layer{}.ln2.rsqrt"},
    {"layer{}.ln2.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, llama, "layer{}.fwd.ln2_x_rsqrt",
     "layer{}.ln2.normed"},
    {"layer{}.fwd.ln2_x_rsqrt", shape_rule::bsh, dtype_role::fp32, keep_class::forward_moment, llama | fwd_program | norm_upcasts,
     "layer{}.mlp.fc_in", "layer{}.fwd.ln2_out"},
    {"layer{}.fwd.ln2_normed", shape_rule::bsh, dtype_role::param, keep_class::forward_moment,
     llama | fwd_program | norm_upcasts | unless{norms_train}, "layer{}.fwd.ln2_out"},
    {"layer{}.ln2.normed", shape_rule::bsh, dtype_role::param, keep_class::saved, llama | norms_train | unless{compiled},
     "layer{}.fwd.ln2_out", "layer{}.mlp.fc_in"},
    // Llama: post_attention_layernorm's output, held until the MLP returns (in a 16-bit model what gate and up save).
    {"layer{}.fwd.ln2_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, llama | fwd_program | amp | unless{compiled},
     "layer{}.fwd.down_out"},
    {"layer{}.fwd.ln2_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, llama | fwd_program | no_autocast | peft,
     "layer{}.fwd.down_out"},
    // GPT-2 under autocast: ln_2's fp32 output lives until the layer returns; c_fc as c_attn above.
    {"layer{}.fwd.ln2_out", shape_rule::bsh, dtype_role::param, keep_class::forward_moment, gpt | fwd_program | amp, "@output"},
};

// Gemma 2's post-feedforward RMSNorm.
constexpr hf_row mlp_post_norm_rows[] = {
    {"layer{}.mlp.post_norm.in", shape_rule::bsh, dtype_role::fp32, keep_class::saved, post_norms},
    {"layer{}.mlp.post_norm.rsqrt", shape_rule::bs_1, dtype_role::fp32, keep_class::saved, post_norms},
    {"layer{}.mlp.post_norm.normed", shape_rule::bsh, dtype_role::fp32, keep_class::saved, post_norms},
};

}  // namespace trainplan::hf_rows
