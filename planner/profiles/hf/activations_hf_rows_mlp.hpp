#pragma once
// The hf profile's rows (planner/profiles/hf/activations_hf_rows.hpp): the dense MLP: GPT-2's c_fc, gelu_new and c_proj, a Llama's SwiGLU (gate, up, silu, product,
// down), with their peft adapters and dropout.
#include "planner/profiles/hf/activations_hf_row_rules.hpp"

namespace trainplan::hf_rows {

// A Llama's MLP input as gate and up (or the router) read it.
constexpr hf_row mlp_input_rows[] = {
    {"layer{}.mlp.fc_in", shape_rule::fc_casts, dtype_role::compute, keep_class::saved,
     llama | dense_mlp | fwd_program | no_autocast | trains_mlp | unless{compiled}, "layer{}.fwd.down_out"},
    // Compiled (hf_compile.hpp): the second norm's output, which gate's and up's weight gradients read: saved, as the
    // first norm's (ban_if_materialized_backward).
    {"layer{}.mlp.fc_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | dense_mlp | compiled,
     "layer{}.fwd.down_out"},
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
    {"layer{}.mlp.gate_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | dense_mlp | fwd_program | amp | trains_mlp | unless{compiled},
     "layer{}.mlp.gate"},
    {"layer{}.mlp.gate", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp | separate_proj | mm_output, "layer{}.mlp.silu",
     "layer{}.fwd.mlp_product"},
    {"layer{}.mlp.gate_up", shape_rule::bs2f, dtype_role::compute, keep_class::saved, llama | dense_mlp | fused_proj},
};

// SwiGLU's silu on the gate.
constexpr hf_row silu_rows[] = {
    // (Compiled, hf_compile.hpp: silu and the product are one fused kernel writing the product alone; silu is
    // recomputed from the saved gate.)
    {"layer{}.mlp.silu", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp | unless{compiled},
     "layer{}.mlp.down_in", "layer{}.fwd.mlp_product"},
};

// A Llama's up_proj.
constexpr hf_row up_proj_rows[] = {
    {"layer{}.autocast.weights.up", shape_rule::w_fc, dtype_role::compute, keep_class::autocast_cache,
     llama | dense_mlp | fwd_program | amp | trains_all},
    {"layer{}.mlp.up_in", shape_rule::bsh, dtype_role::compute, keep_class::saved, llama | dense_mlp | fwd_program | amp | trains_mlp | unless{compiled},
     "layer{}.mlp.up"},
    {"layer{}.mlp.up", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp | separate_proj | mm_output, "layer{}.mlp.down_in",
     "layer{}.fwd.mlp_product"},
};

// SwiGLU's product, silu(gate) * up.
constexpr hf_row product_rows[] = {
    // (A frozen down_proj saves no input: the product lives until down_proj's output exists.)
    {"layer{}.fwd.mlp_product", shape_rule::bsf, dtype_role::compute, keep_class::forward_moment,
     llama | dense_mlp | fwd_program | no_autocast | peft, "layer{}.fwd.down_out"},
    // Compiled (hf_compile.hpp): the product down_proj reads, saved: down's weight gradient reads it in a GEMM
    // (ban_if_materialized_backward), though it is pointwise from the saved gate and up.
    {"layer{}.mlp.down_in", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp | compiled,
     "layer{}.fwd.down_out"},
};

// A Llama's down_proj, with its adapter.
constexpr hf_row down_proj_rows[] = {
    {"layer{}.mlp.down_in", shape_rule::bsf, dtype_role::compute, keep_class::saved, llama | dense_mlp | trains_mlp | unless{compiled},
     "layer{}.fwd.down_out"},
    {"layer{}.autocast.weights.down", shape_rule::w_proj, dtype_role::compute, keep_class::autocast_cache,
     llama | dense_mlp | fwd_program | amp | trains_all},
    {"layer{}.fwd.down_out", shape_rule::bsh, dtype_role::compute, keep_class::forward_moment, llama | dense_mlp | fwd_program | mm_output,
     "@output"},
    {"layer{}.lora.down_dropout_mask", shape_rule::bsf, dtype_role::mask, keep_class::saved,
     llama | dense_mlp | peft_mlp | peft_dropout},
    {"layer{}.lora.down_in", shape_rule::bsf, dtype_role::adapter_in, keep_class::saved, llama | dense_mlp | peft_mlp},
    {"layer{}.lora.down_a_out", shape_rule::bs_r, dtype_role::adapter_in, keep_class::saved, llama | dense_mlp | peft_mlp},
};

}  // namespace trainplan::hf_rows
